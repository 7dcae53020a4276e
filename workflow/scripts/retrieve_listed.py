"""Write the candidates each query of a dataset lists, in its order (posbias.retrieval.listed)."""

from posbias import runs, schemas
from posbias.jobs import logged
from posbias.retrieval import listed

sm = snakemake  # noqa: F821
with logged(sm, "retrieve_listed") as log:
    run, empty = listed.search(schemas.read(sm.input.corpus, "corpus"), schemas.read(sm.input.qrels, "qrels"),
                               schemas.read(sm.input.queries, "queries"), sm.params.spec["depth"])
    if empty:
        log.warning("%d queries list no judged documents, so no hits: %s", len(empty), empty[:5])
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, sm.wildcards.retriever)
    log.info("%d listed candidates for %d queries", run.height, run["query_id"].n_unique())
