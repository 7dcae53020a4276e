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
  the canonical scores; ``retained``: the share of canonical scores ≥ τ*;
- ``jaccard_matched`` at ``matched_rate`` (OC-SFT's matched-retention-rate control): the retention Jaccard
  with the threshold that keeps the same share of every scorer's canonical scores, the share of the
  candidates that are relevant (the same for every scorer of a dataset's pools), so that a gain cannot
  come from where one scorer's F1 threshold happens to sit (K = 1 rows of a fixed budget: the control
  reads the plain scorers; NaN on the others);
- ``budget``: ``fixed`` (K draws per presentation) or ``adaptive`` (draws until the aggregate settles, at
  most K: :mod:`posbias.debias.adaptive`, on the same presentations as the fixed K); ``draws``: the mean
  draws per presentation and query (K for a fixed budget);
- ``calls_per_query`` / ``tokens_per_query`` / ``seconds_per_query``: the draws × one presentation's mean
  model calls / prompt tokens / measured model seconds per query (from the rerank jobs' cost files);
- ``plain_shift`` (K = 1 rows of a debiasing method, given the plain scorer's runs of the same
  presentations): the mean over presentations of (1 − Kendall τ)/2 between the method's ranking and
  the plain scorer's, 0 when the method moves no pair. For marker renaming (``rename@1``) this is
  its sensitivity: the share of pairs that flip when only the slots' markers change;
- the diagnostics, means over queries of each query's mean over presentations: ``tie_rate``
  (exactly tied score pairs), ``dispersion`` (score sd) and ``top10_instability`` (1 − mean pairwise
  Jaccard of the top-10 sets; :mod:`posbias.metrics`).

The per-query values (STABILITY_QUERIES) feed the paired tests of the OC-SFT table.

Stability needs at least two presentations; with fewer the row's stability columns are NaN.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow as pa

from posbias import metrics, schemas
from posbias.data.collection import relevance_threshold, top_grade
from posbias.debias import AGGREGATE_LISTS, AVERAGE_SCORES
from posbias.debias.adaptive import ADAPTIVE, FIXED, adaptive_bsc, adaptive_permsc
from posbias.runs import canonical


def scores_by_query(run: pl.DataFrame) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for q, d, s in run.select("query_id", "doc_id", "score").iter_rows():
        out.setdefault(q, {})[d] = s
    return out


def relevant_sets(qrels: pl.DataFrame, relevant_grade: int) -> dict[str, set[str]]:
    """Each query's documents graded at least ``relevant_grade`` (binary qrels: at least 1,
    :func:`posbias.data.collection.relevance_threshold`)."""
    threshold = relevance_threshold(relevant_grade, top_grade(qrels))
    rel = qrels.filter(pl.col("relevance") >= threshold).group_by("query_id", maintain_order=True).agg("doc_id")
    return {q: set(d) for q, d in rel.iter_rows()}


def relevant_share(scores: dict[str, dict[str, float]], relevant: dict[str, set[str]]) -> float:
    """The share of the scored (query, document) candidates that are relevant: the retention rate the
    matched-rate control gives every scorer of the same pools."""
    total = sum(len(s) for s in scores.values())
    return sum(len(relevant.get(q, set()) & set(s)) for q, s in scores.items()) / total if total else math.nan


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


def permsc_presentations(shuffled_runs: list[pl.DataFrame], k: int, aggregation: str,
                         limit: int | None = None) -> list[dict[str, dict[str, float]]]:
    """PermSC@K's presentations: each disjoint group of ``k`` consecutive reranked shuffled lists
    aggregated into one central ranking (:func:`posbias.debias.list_level.aggregate_runs`, rank-derived scores);
    at most ``limit`` groups."""
    from posbias.debias.list_level import aggregate_runs

    groups = len(shuffled_runs) // k
    return [scores_by_query(aggregate_runs(shuffled_runs[g * k:(g + 1) * k], aggregation))
            for g in range(min(groups, limit) if limit else groups)]


def _run(scores: dict[str, dict[str, float]]) -> pl.DataFrame:
    rows = [(q, d, s) for q, docs in scores.items() for d, s in docs.items()]
    return canonical(pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64},
                                  orient="row"))


def ndcg_by_query(scores: dict[str, dict[str, float]], qrels: pl.DataFrame,
                  measure: str = "nDCG@10") -> dict[str, float]:
    """Each query's ``measure`` (ir_measures) of the ranking by ``scores``."""
    judged = qrels.filter(pl.col("query_id").is_in(list(scores)))
    per_query = metrics.evaluate(_run(scores), judged, [measure], "m", "d")
    return dict(per_query.select("query_id", "value").iter_rows())


def _ndcg10(scores: dict[str, dict[str, float]], qrels: pl.DataFrame) -> float:
    return float(np.mean(list(ndcg_by_query(scores, qrels).values())))


QUERY_COLUMNS = schemas.STABILITY_QUERY_VALUES


def _ranked(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (-scores[d], d))


def plain_shift(method: list[dict[str, dict[str, float]]], plain: list[dict[str, dict[str, float]]],
                ) -> dict[str, float]:
    """Per query, the mean over presentations (``method[i]`` and ``plain[i]`` score the same one) of
    (1 − Kendall τ)/2 between the two rankings (:func:`posbias.metrics.tau_psi` of the pair)."""
    if len(method) != len(plain):
        raise ValueError(f"plain_shift: {len(method)} presentations of the method, {len(plain)} of the plain scorer")
    shifts: dict[str, list[float]] = {}
    for m, p in zip(method, plain):
        for q in set(m) & set(p):
            shifts.setdefault(q, []).append(metrics.tau_psi([_ranked(m[q]), _ranked(p[q])]))
    return {q: float(np.mean(v)) for q, v in shifts.items()}


def adaptive_presentations(shuffled: list[dict[str, dict[str, float]]], cap: int, combine: str,
                           aggregation: str | None, patience: int, depth: int, limit: int | None = None,
                           ) -> tuple[list[dict[str, dict[str, float]]], list[dict[str, int]]]:
    """BSC or PermSC with an adaptive budget (:mod:`posbias.debias.adaptive`) on the same presentations as
    the fixed-K method at K = ``cap``: each disjoint group of ``cap`` consecutive shuffles, drawn in order
    until the aggregate's top ``depth`` is unchanged for ``patience`` draws. Returns (each presentation's
    scores per query: BSC's means or PermSC's rank-derived scores; each presentation's draws per query)."""
    shown, draws = [], []
    groups = len(shuffled) // cap
    for g in range(min(groups, limit) if limit else groups):
        group = shuffled[g * cap:(g + 1) * cap]
        scores: dict[str, dict[str, float]] = {}
        used: dict[str, int] = {}
        for q in sorted(set.intersection(*(set(s) for s in group))):
            if combine == AVERAGE_SCORES:
                scores[q], used[q] = adaptive_bsc([s[q] for s in group], patience, depth)
            else:
                central, used[q] = adaptive_permsc([_ranked(s[q]) for s in group], aggregation, patience, depth)
                scores[q] = {d: float(len(central) - r) for r, d in enumerate(central)}
        shown.append(scores)
        draws.append(used)
    return shown, draws


def stability_table(canonical_run: pl.DataFrame, shuffled_runs: list[pl.DataFrame], qrels: pl.DataFrame,
                    relevant_grade: int, ks: list[int], keys: dict[str, str], cost: dict[str, float],
                    grid_points: int = 41, presentations: int | None = 10, combine: str | None = AVERAGE_SCORES,
                    aggregation: str | None = None, plain_runs: list[pl.DataFrame] | None = None,
                    adaptive: dict | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(STABILITY: one row per K in ``ks`` (K ≤ the number of shuffled runs), each over at most
    ``presentations`` (M) presentations; STABILITY_QUERIES: the same per query, for paired tests).

    ``combine`` says how K > 1 presentations are formed: BSC's mean scores (``AVERAGE_SCORES``, a
    pointwise scorer), PermSC's rank aggregation by ``aggregation`` of a listwise model's reranked
    lists (``AGGREGATE_LISTS``) or None (K = 1 rows only). ``keys`` names the rows (model, dataset,
    retriever, debias, family). ``cost``: one presentation's mean ``calls``, ``prompt_tokens`` and
    (optionally) ``seconds`` per query. ``plain_runs``: for a debiasing method, the plain scorer's
    canonical then shuffled runs (the same presentations), for ``plain_shift``. ``adaptive`` (``caps``,
    ``patience``, ``depth``): for each cap K, a row of the adaptive-budget method (budget ``adaptive``) on
    the fixed K's presentations, its cost the draws it made (:func:`adaptive_presentations`)."""
    canonical = scores_by_query(canonical_run)
    shuffled = [scores_by_query(r) for r in shuffled_runs]
    if combine not in (AVERAGE_SCORES, AGGREGATE_LISTS, None):
        raise ValueError(f"combine {combine!r}: use {AVERAGE_SCORES}, {AGGREGATE_LISTS} or None")
    measure = _Measure(canonical, qrels, relevant_sets(qrels, relevant_grade), grid_points, keys, cost)
    rows, query_rows = [], []
    for k in sorted(k for k in ks if k <= len(shuffled) and (k == 1 or combine)):
        shown = (permsc_presentations(shuffled_runs, k, aggregation, presentations)
                 if combine == AGGREGATE_LISTS and k > 1
                 else bsc_presentations(shuffled, k, presentations))
        shift = (plain_shift([canonical, *shuffled], [scores_by_query(r) for r in plain_runs])
                 if k == 1 and plain_runs is not None else {})
        row, per_query = measure(shown, k, FIXED, [dict.fromkeys(p, k) for p in shown], shift)
        rows.append(row)
        query_rows += per_query
    caps = adaptive["caps"] if adaptive and combine else []
    for cap in sorted(c for c in caps if 2 <= c <= len(shuffled)):
        shown, draws = adaptive_presentations(shuffled, cap, combine, aggregation, adaptive["patience"],
                                              adaptive["depth"], presentations)
        row, per_query = measure(shown, cap, ADAPTIVE, draws, {})
        rows.append(row)
        query_rows += per_query
    return (pl.from_arrow(pa.Table.from_pylist(rows, schema=schemas.STABILITY)),
            pl.from_arrow(pa.Table.from_pylist(query_rows, schema=schemas.STABILITY_QUERIES)))


class _Measure:
    """One row's metrics from its presentations (the loop body of :func:`stability_table`)."""

    def __init__(self, canonical: dict[str, dict[str, float]], qrels: pl.DataFrame, relevant: dict[str, set[str]],
                 grid_points: int, keys: dict[str, str], cost: dict[str, float]) -> None:
        self.canonical, self.qrels, self.relevant, self.grid_points = canonical, qrels, relevant, grid_points
        self.keys, self.cost = keys, cost
        self.base_ndcg = _ndcg10(canonical, qrels)

    def __call__(self, shown: list[dict[str, dict[str, float]]], k: int, budget: str, draws: list[dict[str, int]],
                 shift: dict[str, float]) -> tuple[dict, list[dict]]:
        canonical = self.canonical
        common = sorted(set(canonical).intersection(*(set(p) for p in shown)))
        per_query = {q: dict.fromkeys(QUERY_COLUMNS, math.nan) for q in common}
        ndcg = [ndcg_by_query(p, self.qrels) for p in shown]
        for q in common:
            per_query[q]["ndcg10"] = float(np.mean([n.get(q, 0.0) for n in ndcg]))
            per_query[q]["tie_rate"] = float(np.mean([metrics.tie_rate(list(p[q].values())) for p in shown]))
            per_query[q]["dispersion"] = float(np.mean([metrics.score_dispersion(list(p[q].values())) for p in shown]))
            per_query[q]["draws"] = float(np.mean([d[q] for d in draws]))
            if q in shift:
                per_query[q]["plain_shift"] = shift[q]
        jac = tau = f1 = retained = matched = jac_matched = math.nan
        if len(shown) >= 2 and common:
            for q in common:
                ranked = [_ranked(p[q]) for p in shown]
                per_query[q]["tau_psi"] = metrics.tau_psi(ranked)
                per_query[q]["top10_instability"] = metrics.topk_instability(ranked, 10)
            over = {q: {d: [p[q][d] for p in shown] for d in shown[0][q]} for q in common}
            scored = {q: canonical[q] for q in common}
            result = metrics.retention_jaccard(scored, self.relevant, over, self.grid_points)
            jac, tau, f1, retained = result["jaccard"], result["threshold"], result["f1"], result["retained"]
            for q, value in result["per_query"].items():
                per_query[q]["jaccard"] = value
            matched = relevant_share(scored, self.relevant)
            if matched > 0 and k == 1 and budget == FIXED:  # the control reads the plain scorers only
                result = metrics.retention_jaccard(scored, self.relevant, over, rate=matched)
                jac_matched = result["jaccard"]
                for q, value in result["per_query"].items():
                    per_query[q]["jaccard_matched"] = value
        means = {c: float(np.mean([v[c] for v in per_query.values()])) if per_query else math.nan
                 for c in QUERY_COLUMNS if c not in ("ndcg10", "jaccard", "jaccard_matched")}
        draws_mean = means["draws"] if per_query else float(k)
        row = {**self.keys, "k": k, "budget": budget, "presentations": len(shown), "queries": len(common),
               "ndcg10_canonical": self.base_ndcg, "ndcg10": float(np.mean([np.mean(list(n.values())) for n in ndcg])),
               **means, "jaccard": jac, "threshold": tau, "f1": f1, "retained": retained,
               "matched_rate": matched, "jaccard_matched": jac_matched,
               "calls_per_query": draws_mean * self.cost["calls"],
               "tokens_per_query": draws_mean * self.cost["prompt_tokens"],
               "seconds_per_query": draws_mean * self.cost.get("seconds", math.nan)}
        return row, [{**self.keys, "k": k, "budget": budget, "query_id": q, **v} for q, v in per_query.items()]
