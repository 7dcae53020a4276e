"""Build the first-stage index of one (dataset, retriever), as its kind builds it (posbias.retrieval.kinds)."""

from pathlib import Path

from posbias import hub, schemas
from posbias.jobs import logged
from posbias.retrieval import kinds

sm = snakemake  # noqa: F821
spec = sm.params.spec
with logged(sm, "index") as log:
    corpus = schemas.read(sm.input.corpus, "corpus")
    hub.require(sm.params.model, f"retrievers.{sm.wildcards.retriever}.model")
    job = kinds.RetrievalJob(spec, {"corpus": corpus}, model=sm.params.model, device=sm.params.device,
                             threads=sm.threads)
    kinds.build_index(spec["kind"], job, Path(sm.output[0]))
    log.info("indexed %d docs with %s", corpus.height, spec["kind"])
