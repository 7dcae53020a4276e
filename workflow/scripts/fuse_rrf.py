"""Reciprocal-rank fusion of a dataset's runs."""

from posbias import runs, schemas
from posbias.jobs import logged
from posbias.retrieval.fusion import rrf

sm = snakemake  # noqa: F821
with logged(sm, "fuse_rrf") as log:
    fused = rrf([schemas.read(p, "run") for p in sm.input.runs], k=sm.params.spec["k"], depth=sm.params.spec["depth"])
    schemas.write(fused, sm.output.run, "run")
    runs.write_trec(fused, sm.output.trec, sm.wildcards.retriever)
    log.info("fused %d runs into %d hits", len(sm.input.runs), fused.height)
