"""Search one index (built by the workflow, or a pyserini prebuilt one) with the dataset's queries;
write the run as Parquet and TREC."""

from pathlib import Path

from posbias import hub, runs, schemas
from posbias.jobs import logged
from posbias.retrieval import dense, lucene, splade

sm = snakemake  # noqa: F821
spec = sm.params.spec
index = sm.params.prebuilt or Path(sm.input.index)  # a prebuilt index is a name, the workflow's a folder
with logged(sm, "retrieve") as log:
    queries = schemas.read(sm.input.queries, "queries")
    hub.require(sm.params.model, f"retrievers.{sm.wildcards.retriever}.model")
    if spec["kind"] == "bm25":
        run, empty = lucene.search_bm25(index, queries, spec["depth"], spec["k1"], spec["b"], sm.threads)
    elif spec["kind"] == "dense":
        run, empty = dense.search(index, queries, spec["depth"], sm.params.model, spec["pooling"], spec["l2_norm"],
                                  spec["max_length"], sm.params.device, sm.threads)
    else:
        run, empty = splade.search(index, queries, spec["depth"], sm.params.model, sm.params.device, sm.threads)
    if empty:
        log.warning("%d of %d queries have no hits (kept; they score 0): %s", len(empty), queries.height, empty[:5])
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, sm.wildcards.retriever)
    log.info("%d hits for %d queries", run.height, run["query_id"].n_unique())
