"""Significance and seed statistics of the paper tables.

Paired two-sided Wilcoxon signed-rank tests over queries (``scipy.stats.wilcoxon``; zero
differences dropped, ``zero_method="wilcox"``), Holm-corrected within the family stated in each
table's notes (``scipy.stats.false_discovery_control`` does Benjamini–Hochberg only, so
:func:`holm` implements Holm's step-down, which is four lines).
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1); NaN stays NaN."""
    indexed = [(p, i) for i, p in enumerate(pvalues) if not math.isnan(p)]
    indexed.sort()
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    m = len(indexed)
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


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
