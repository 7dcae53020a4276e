"""Write the oracle first stage (qrels grade + seeded noise) of a dataset's queries."""

from posbias import runs, schemas
from posbias.jobs import logged
from posbias.retrieval import oracle

sm = snakemake  # noqa: F821
spec = sm.params.spec
with logged(sm, "retrieve_oracle") as log:
    run, empty = oracle.search(schemas.read(sm.input.qrels, "qrels"), schemas.read(sm.input.queries, "queries"),
                               spec["noise"], spec["depth"], sm.params.seed)
    if empty:
        log.warning("%d queries have no judged documents, so no hits: %s", len(empty), empty[:5])
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, sm.wildcards.retriever)
    log.info("%d hits for %d queries (noise %.2f)", run.height, run["query_id"].n_unique(), spec["noise"])
