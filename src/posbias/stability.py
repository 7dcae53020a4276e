"""Decision stability of pointwise scorers: quality and stability side by side, for BSC@K.

Inputs are one experiment's scored runs: the canonical (first-stage order) run and M shuffled runs
(``shuffled-0 … shuffled-{M-1}``; each a seeded shuffle of the top-depth, re-chunked into windows
of B and rescored). BSC@K averages a document's scores over K shuffles and sorts by the mean; its
presentations are disjoint groups of K consecutive shuffles (at most M of them; M = 10 by default),
so every presentation is an independent draw (K = 1: the first M shuffled runs themselves);
K × M shuffled runs give every K its full M presentations. For each K:

- ``ndcg10``: mean nDCG@10 over the presentations (ir_measures); ``ndcg10_canonical`` the
  canonical order's nDCG@10 of the plain model;
- ``tau_psi``: mean per-query τ-PSI over the presentations' rankings (:func:`posbias.metrics.tau_psi`);
- ``jaccard`` / ``threshold`` / ``f1``: :func:`posbias.metrics.retention_jaccard` with τ* chosen on
  the canonical scores;
- ``calls_per_query``: K × the model calls per query of one presentation.

Stability needs at least two presentations; with fewer the row's stability columns are NaN.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from posbias import metrics
from posbias.runs import canonical


def scores_by_query(run: pl.DataFrame) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, s in run.select("query_id", "doc_id", "score").iter_rows():
        out.setdefault(q, {})[d] = s
    return out


def bsc_presentations(shuffled: list[dict[str, dict[str, float]]], k: int,
                      limit: int | None = None) -> list[dict[str, dict[str, float]]]:
    """Mean scores over each disjoint group of ``k`` consecutive shuffles (queries scored in all of them);
    at most ``limit`` groups."""
    out = []
    groups = len(shuffled) // k
    for g in range(min(groups, limit) if limit else groups):
        group = shuffled[g * k:(g + 1) * k]
        common = set.intersection(*(set(s) for s in group))
        out.append({q: {d: float(np.mean([s[q][d] for s in group])) for d in group[0][q]} for q in sorted(common)})
    return out


def _run(scores: dict[str, dict[str, float]]) -> pl.DataFrame:
    rows = [(q, d, s) for q, docs in scores.items() for d, s in docs.items()]
    return canonical(pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64},
                                  orient="row"))


def _ndcg10(scores: dict[str, dict[str, float]], qrels: pl.DataFrame) -> float:
    judged = qrels.filter(pl.col("query_id").is_in(list(scores)))
    per_query = metrics.evaluate(_run(scores), judged, ["nDCG@10"], "m", "d")
    return float(per_query["value"].mean())


def stability_table(canonical_run: pl.DataFrame, shuffled_runs: list[pl.DataFrame], qrels: pl.DataFrame,
                    relevant_grade: int, ks: list[int], keys: dict[str, str], calls_per_query: float,
                    grid_points: int = 41, presentations: int | None = 10) -> pl.DataFrame:
    """One STABILITY row per K in ``ks`` (K ≤ the number of shuffled runs), each over at most
    ``presentations`` (M) presentations."""
    canonical = scores_by_query(canonical_run)
    shuffled = [scores_by_query(r) for r in shuffled_runs]
    rel = (qrels.filter(pl.col("relevance") >= relevant_grade).group_by("query_id", maintain_order=True)
           .agg(pl.col("doc_id")))
    relevant = {q: set(d) for q, d in rel.iter_rows()}
    base_ndcg = _ndcg10(canonical, qrels)
    rows = []
    for k in sorted(k for k in ks if k <= len(shuffled)):
        shown = bsc_presentations(shuffled, k, presentations)
        common = sorted(set(canonical).intersection(*(set(p) for p in shown)))
        psi = jac = tau = f1 = math.nan
        if len(shown) >= 2 and common:
            psi = float(np.mean([metrics.tau_psi([sorted(p[q], key=lambda d, p=p, q=q: (-p[q][d], d))
                                                  for p in shown]) for q in common]))
            over = {q: {d: [p[q][d] for p in shown] for d in shown[0][q]} for q in common}
            result = metrics.retention_jaccard({q: canonical[q] for q in common}, relevant, over, grid_points)
            jac, tau, f1 = result["jaccard"], result["threshold"], result["f1"]
        rows.append({**keys, "k": k, "presentations": len(shown), "queries": len(common),
                     "ndcg10_canonical": base_ndcg,
                     "ndcg10": float(np.mean([_ndcg10(p, qrels) for p in shown])),
                     "tau_psi": psi, "jaccard": jac, "threshold": tau, "f1": f1,
                     "calls_per_query": k * calls_per_query})
    return pl.DataFrame(rows, schema={"model": pl.String, "dataset": pl.String, "retriever": pl.String,
                                      "k": pl.Int32, "presentations": pl.Int64, "queries": pl.Int64,
                                      "ndcg10_canonical": pl.Float64, "ndcg10": pl.Float64, "tau_psi": pl.Float64,
                                      "jaccard": pl.Float64, "threshold": pl.Float64, "f1": pl.Float64,
                                      "calls_per_query": pl.Float64})
