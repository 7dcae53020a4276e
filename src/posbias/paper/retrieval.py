"""The first-stage retrieval table: every (dataset, retriever) on the configured measures."""

from __future__ import annotations

import polars as pl

from posbias.metrics import as_evaluated
from posbias.paper.writers import Table, fmt


def retrieval_table(aggregated: pl.DataFrame, measure_order: list[str]) -> Table:
    """One row per (dataset, system), one column per measure (in ``measure_order``; a binary measure as
    evaluated on TREC DL-graded qrels beside it: ``AP(rel=2)``), values to 4 decimals."""
    wide = aggregated.pivot(on="measure", index=["dataset", "system", "queries"], values="value")
    names = dict.fromkeys(str(m) for plain, dl in zip(as_evaluated(measure_order, False), as_evaluated(measure_order, True))
                          for m in (plain, dl))
    cols = [name for name in names if name in wide.columns]
    data = wide.select("dataset", "system", "queries", *cols).sort("dataset", "system")
    view = data.with_columns(pl.col("queries").cast(pl.String), *[pl.col(c).map_elements(fmt, return_dtype=pl.String)
                                                                   for c in cols])
    return Table(data, view, "Mean over judged queries (queries with no hits count as 0).")
