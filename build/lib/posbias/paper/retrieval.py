"""The first-stage retrieval table: every (dataset, retriever) on the configured measures."""

from __future__ import annotations

import polars as pl

from posbias.metrics import parse_measures
from posbias.paper.writers import Table, fmt


def retrieval_table(aggregated: pl.DataFrame, measure_order: list[str]) -> Table:
    """One row per (dataset, system), one column per measure (in ``measure_order``), values to 4 decimals."""
    wide = aggregated.pivot(on="measure", index=["dataset", "system", "queries"], values="value")
    cols = [str(m) for m in parse_measures(measure_order) if str(m) in wide.columns]
    data = wide.select("dataset", "system", "queries", *cols).sort("dataset", "system")
    view = data.with_columns(pl.col("queries").cast(pl.String), *[pl.col(c).map_elements(fmt, return_dtype=pl.String)
                                                                   for c in cols])
    return Table(data, view, "Mean over judged queries (queries with no hits count as 0).")
