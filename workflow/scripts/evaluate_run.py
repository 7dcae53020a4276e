"""Per-query evaluation of one run against the dataset's qrels (long format)."""

from posbias import metrics, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "evaluate_run") as log:
    run = schemas.read(sm.input.run, "run")
    qrels = schemas.read(sm.input.qrels, "qrels")
    per_query = metrics.evaluate(run, qrels, sm.params.measures, sm.wildcards.retriever, sm.wildcards.dataset)
    schemas.write(per_query, sm.output[0], "metrics")
    for row in metrics.aggregate(per_query).iter_rows(named=True):
        log.info("%s %s %s = %.4f over %d queries", row["dataset"], row["system"], row["measure"], row["value"], row["queries"])
