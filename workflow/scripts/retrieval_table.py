"""Gather per-query metrics of all runs into the aggregate Parquet and the retrieval table."""

from pathlib import Path

import polars as pl

from posbias import metrics, paper, schemas
from posbias.jobs import logged
from posbias.paper.retrieval import retrieval_table

sm = snakemake  # noqa: F821
with logged(sm, "retrieval_table") as log:
    per_query = pl.concat([schemas.read(p, "metrics") for p in sm.input])
    aggregated = metrics.aggregate(per_query)
    schemas.write(aggregated, sm.output.parquet, "summary")
    paper.write(retrieval_table(aggregated, sm.params.measures), sm.output.table[: -len(".md")], "First-stage retrieval")
    log.info("\n%s", Path(sm.output.table).read_text())
