"""omega[input position, output rank] from the reranked samples, and its heatmap."""

from posbias import propensity, schemas
from posbias.jobs import logged
from posbias.paper.omega import omega_heatmap

sm = snakemake  # noqa: F821
with logged(sm, "propensity_estimate") as log:
    omega = propensity.estimate(schemas.read(sm.input[0], "transitions"), sm.params.k, sm.params.smoothing)
    schemas.write(propensity.to_frame(omega), sm.output.omega, "omega")
    omega_heatmap(omega, sm.output.heatmap, f"{sm.wildcards.model}: P(output rank | input position)")
    k = sm.params.k
    log.info("k*omega top-left %.4f, top-right %.4f, bottom-left %.4f, bottom-right %.4f",
             k * omega[0, 0], k * omega[0, -1], k * omega[-1, 0], k * omega[-1, -1])
