"""Significance and seed statistics of the paper tables.

Paired two-sided Wilcoxon signed-rank tests over queries (``scipy.stats.wilcoxon``; zero
differences dropped, ``zero_method="wilcox"``), Holm-corrected within the family stated in each
table's notes (statsmodels' ``multipletests``, method ``holm``).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

ALPHA = 0.05


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1) over the family of the p-values that
    are not NaN (a test that could not run is not counted); NaN stays NaN."""
    from statsmodels.stats.multitest import multipletests

    values = np.asarray(pvalues, dtype=float)
    tested = ~np.isnan(values)
    adjusted = np.full(len(values), math.nan)
    if tested.any():
        adjusted[tested] = multipletests(values[tested], method="holm")[1]
    return adjusted.tolist()


def paired_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired per-query values (NaN when all differences are 0)."""
    from scipy.stats import wilcoxon

    if len(a) < 2 or np.allclose(a, b):
        return math.nan
    return float(wilcoxon(a, b, zero_method="wilcox").pvalue)


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample sd (NaN sd for a single value) of a sequence of numbers."""
    array = np.asarray(list(values), dtype=float)
    if not len(array):
        return math.nan, math.nan
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else math.nan


def paired_against(per_query: pl.DataFrame, key: str, reference: str, metrics: tuple[str, ...]) -> pl.DataFrame:
    """Each ``key`` value's per-query ``metrics`` against ``reference``'s, over the queries both have (a
    query with a NaN in either is left out of that metric): (``key``, metric, p), p a paired two-sided
    Wilcoxon test. ``per_query`` has one row per (``key``, query_id)."""
    ref = per_query.filter(pl.col(key) == reference)
    rows = []
    for other in per_query[key].unique(maintain_order=True).to_list():
        if other == reference or ref.height == 0:
            continue
        both = ref.join(per_query.filter(pl.col(key) == other), on="query_id", suffix="_other")
        for metric in metrics:
            pair = both.select(metric, f"{metric}_other").drop_nulls().drop_nans()
            p = paired_pvalue(pair[metric].to_numpy(), pair[f"{metric}_other"].to_numpy()) if pair.height else math.nan
            rows.append({key: other, "metric": metric, "p": p})
    return pl.DataFrame(rows, schema={key: pl.String, "metric": pl.String, "p": pl.Float64})


def holm_by_metric(tests: pl.DataFrame) -> pl.DataFrame:
    """``tests`` (a ``metric`` and a ``p`` column) with ``p_holm``: Holm-corrected over every comparison of
    the same metric."""
    parts = [part.with_columns(p_holm=pl.Series(holm(part["p"].to_list()), dtype=pl.Float64))
             for _, part in tests.group_by("metric", maintain_order=True)]
    return pl.concat(parts) if parts else tests.with_columns(p_holm=pl.lit(None, dtype=pl.Float64))


def significant(tests: pl.DataFrame, keys: tuple[str, ...]) -> set[tuple]:
    """The ``keys`` of every test in ``tests`` whose Holm-adjusted p (``p_holm``) is below :data:`ALPHA`
    (a None or NaN p is not significant): the cells a table marks with †."""
    return {tuple(r[k] for k in keys) for r in tests.iter_rows(named=True)
            if r["p_holm"] is not None and not math.isnan(r["p_holm"]) and r["p_holm"] < ALPHA}
