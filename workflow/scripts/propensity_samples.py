"""Sample N_q training queries and n seeded shuffles of their first-stage top k."""

from posbias import propensity, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
p = sm.params.propensity
with logged(sm, "propensity_samples") as log:
    sampled = propensity.samples(schemas.read(sm.input.run, "run"), p["queries"], p["k"], p["shuffles"], sm.params.seed)
    schemas.write(sampled, sm.output[0], "propensity_samples")
    log.info("%d queries x %d shuffles x k=%d", sampled["query_id"].n_unique(), p["shuffles"], p["k"])
