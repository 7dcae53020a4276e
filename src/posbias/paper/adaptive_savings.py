"""Calls an adaptive permutation budget saves against fixed K at equal quality and stability (beyond the
papers; :mod:`posbias.debias.adaptive`).

An adaptive row (BSC / PermSC drawing shuffles until the aggregate's top set settles, at most K) pays its mean
draws. Against it stands the same model's fixed-budget curve on the same queries: the plain model (K = 1) and
BSC@K / PermSC@K for every fixed K, each at its calls per query. For each metric, the calls a fixed budget needs
to be as good as the adaptive row are read off that curve, linearly between the two Ks that bracket the adaptive
value (the first fixed point at least as good, walking up in calls); the saving is 1 − adaptive calls / those
calls. When no fixed K measured is as good, the fixed budget needs more than the largest K's calls and the
saving is at least 1 − adaptive calls / those.
"""

from __future__ import annotations

import math

import polars as pl

from posbias.debias.adaptive import ADAPTIVE, FIXED
from posbias.paper.frontier import frontier_rows
from posbias.paper.writers import Table, fmt, view_or_none

# Each compared metric and its better direction.
METRICS = {"ndcg10": ("nDCG@10", "max"), "tau_psi": ("τ-PSI", "min"), "jaccard": ("retention Jaccard", "max")}


def calls_at(curve: list[tuple[float, float]], target: float, sense: str) -> float:
    """The calls at which a fixed-budget curve (``(calls, value)`` points) first reaches ``target``: walking up
    in calls, the first point at least as good (``sense`` ``max``: ≥, ``min``: ≤), interpolated linearly from
    the point before it; the first point's calls when it is already as good; NaN when none is."""
    points = sorted(curve)
    for i, (calls, value) in enumerate(points):
        if (value >= target) if sense == "max" else (value <= target):
            if i == 0:
                return calls
            c0, v0 = points[i - 1]
            return c0 + (calls - c0) * (target - v0) / (value - v0)
    return math.nan


def savings_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per adaptive row of ``rows`` (:func:`posbias.paper.frontier.frontier_rows`): its calls and
    draws, and per metric its value, the fixed-budget calls at that value (``<metric>_fixed_calls``, NaN when
    no fixed K is as good), the largest fixed K's calls (``max_fixed_calls``) and the saving."""
    out = []
    if "budget" not in rows.columns:
        return pl.DataFrame()
    keys = ("dataset", "retriever", "family", "variant")
    for r in rows.filter(pl.col("budget") == ADAPTIVE).iter_rows(named=True):
        same = rows.filter(pl.all_horizontal(pl.col(k) == r[k] for k in keys) & (pl.col("budget") == FIXED)
                           & ((pl.col("k") > 1) | (pl.col("method") == "none")))
        row = {k: r[k] for k in keys} | {"method": r["method"], "k": r["k"], "calls": r["calls"], "draws": r["draws"],
                                          "max_fixed_calls": float(same["calls"].max()) if same.height else math.nan}
        for metric, (_, sense) in METRICS.items():
            fixed = calls_at(list(zip(same["calls"], same[metric])), r[metric], sense)
            row[metric], row[f"{metric}_fixed_calls"] = r[metric], fixed
            row[f"{metric}_saved"] = 1 - r["calls"] / (fixed if not math.isnan(fixed) else row["max_fixed_calls"])
        out.append(row)
    return pl.DataFrame(out)


def adaptive_savings(per_query: pl.DataFrame, stability: pl.DataFrame, variants: dict[str, str],
                     decisions: pl.DataFrame | None = None) -> Table:
    """The savings table: per adaptive row of the frontier, the calls a fixed K needs for the same nDCG@10,
    τ-PSI and retention Jaccard, and the share of calls the adaptive budget saves (negative: it costs more)."""
    data = savings_rows(frontier_rows(per_query, stability, variants, decisions))
    view = []
    for r in data.iter_rows(named=True):
        row = {"dataset": f"{r['dataset']} · {r['retriever']}", "model": r["variant"], "method": r["method"],
               "draws": fmt(r["draws"], 2), "calls/query": fmt(r["calls"], 1)}
        for metric, (label, _) in METRICS.items():
            fixed, beyond = r[f"{metric}_fixed_calls"], math.isnan(r[f"{metric}_fixed_calls"])
            row[label] = fmt(r[metric], 3)
            row[f"fixed calls at equal {label}"] = f"> {fmt(r['max_fixed_calls'], 1)}" if beyond else fmt(fixed, 1)
            row[f"saved ({label})"] = ("≥ " if beyond else "") + f"{100 * r[f'{metric}_saved']:.0f}%"
        view.append(row)
    notes = ("Each adaptive budget (draws until the aggregate's top set settles, at most K; posbias.debias.adaptive) "
             "against the same model's fixed budgets on the same queries: the plain model and BSC@K / PermSC@K for "
             "every fixed K. 'fixed calls at equal …': the calls per query at which the fixed-budget curve first "
             "reaches the adaptive row's value, linear between the two Ks around it ('> N': no fixed K measured is "
             "as good, so more than the largest K's N calls); saved: 1 − adaptive calls / those calls (negative: "
             "the adaptive budget pays more for that metric). The stopping rule watches the top set, so it is the "
             "retained set and the top of the ranking it steadies, not necessarily the whole ranking (τ-PSI).")
    return Table(data, view_or_none(view, "adaptive budgets", "none: no experiment of this run has shuffled orders "
                                   "an adaptive budget (ocsft.adaptive) draws from"), notes)
