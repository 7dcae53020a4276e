"""Gather per-query metrics of all runs into the aggregate Parquet and the markdown table."""

from pathlib import Path

import polars as pl

from posbias import metrics, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm.log[0], "retrieval_table") as log:
    per_query = pl.concat([schemas.read(p, "metrics") for p in sm.input])
    aggregated = metrics.aggregate(per_query)
    schemas.write(aggregated, sm.output.parquet, "summary")
    Path(sm.output.table).write_text(
        "# First-stage retrieval\n\nMean over judged queries (queries with no hits count as 0).\n\n"
        + metrics.markdown_table(aggregated, sm.params.measures)
    )
    log.info("\n%s", metrics.markdown_table(aggregated, sm.params.measures))
