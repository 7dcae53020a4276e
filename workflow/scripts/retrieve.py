"""One first-stage run of a dataset, as the retriever's kind searches (posbias.retrieval.kinds): its index
(built by the workflow, or a pyserini prebuilt one) or the dataset tables and runs it reads; written as
Parquet and TREC."""

from pathlib import Path

from posbias import hub, runs, schemas
from posbias.errors import PosbiasError
from posbias.jobs import logged
from posbias.retrieval import kinds

sm = snakemake  # noqa: F821
spec = sm.params.spec
with logged(sm, "retrieve") as log:
    hub.require(sm.params.model, f"retrievers.{sm.wildcards.retriever}.model")
    built = sm.input.get("index")  # .get: a missing name reads as a guard, not None ("index" is a list method)
    index = sm.params.prebuilt or (Path(built) if built else None)  # a prebuilt index is a name, ours a folder
    job = kinds.RetrievalJob(spec, {name: schemas.read(sm.input.get(name), name) for name in sm.params.tables},
                             [schemas.read(p, "run") for p in sm.input.get("runs", [])], index, sm.params.model,
                             sm.params.device, sm.threads, sm.params.seed)
    try:
        run, empty = kinds.search(spec["kind"], job)
    except PosbiasError as exc:
        if not sm.params.prebuilt:
            raise
        raise PosbiasError(f"datasets.{sm.wildcards.dataset}.prebuilt.{sm.wildcards.retriever}: {exc}") from None
    if empty:
        log.warning("%d queries have no hits (kept; they score 0): %s", len(empty), empty[:5])
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, sm.wildcards.retriever)
    log.info("%d hits for %d queries (%s)", run.height, run["query_id"].n_unique(), spec["kind"])
