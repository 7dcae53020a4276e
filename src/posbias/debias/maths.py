"""Inference-time debiasing: rank aggregation (PermSC), calibration (CapCal) and score averaging (BSC).

- :func:`kemeny`: the Kemeny-optimal consensus of several rankings (minimum total Kendall-τ
  distance), exact as a 0/1 integer program solved by scipy's MILP (HiGHS). Variables are the
  pairwise orders x_ij (i before j) for i < j in canonical (sorted id) order; transitivity is two
  inequalities per triple. Among co-optimal consensuses the one closest (in Kendall distance) to
  the Borda ranking wins, through a secondary objective too small to change the primary optimum;
  the model depends only on the pairwise counts and on sorted ids, so the result does not depend
  on the order the rankings are given in.
- :func:`borda` and :func:`rrf_consensus`: cheaper aggregations; :func:`local_search` improves a
  ranking by single-item moves, for lists longer than the exact solver should take;
  :func:`aggregate` picks among them (PermSC's aggregation step, per window or over full lists).
- :func:`capcal_scores`: content-agnostic probability calibration,
  S(d) = P(d | x) − α·(P(d | x_empty) − 1/|C|), with α fixed or entropy-adaptive.
- :func:`bsc`: the mean of each passage's score over several presentations, sorted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np


def _check(rankings: Sequence[Sequence[str]]) -> list[str]:
    if not rankings:
        raise ValueError("need at least one ranking")
    items = sorted(rankings[0])
    for r in rankings:
        if sorted(r) != items or len(set(r)) != len(r):
            raise ValueError("every ranking must order the same distinct items")
    return items


def pairwise_counts(rankings: Sequence[Sequence[str]], items: list[str]) -> np.ndarray:
    """C[i, j] = number of rankings that put items[i] before items[j]."""
    index = {d: i for i, d in enumerate(items)}
    counts = np.zeros((len(items), len(items)), dtype=np.int64)
    for ranking in rankings:
        pos = np.empty(len(items), dtype=np.int64)
        for p, d in enumerate(ranking):
            pos[index[d]] = p
        counts += pos[:, None] < pos[None, :]
    return counts


def kendall_distance_total(ranking: Sequence[str], rankings: Sequence[Sequence[str]]) -> int:
    """Σ over ``rankings`` of the number of pairs ordered differently from ``ranking``."""
    items = sorted(ranking)
    counts = pairwise_counts(rankings, items)
    index = {d: i for i, d in enumerate(items)}
    total = 0
    for a, b in combinations(ranking, 2):  # a before b in ``ranking``
        total += counts[index[b], index[a]]
    return int(total)


def borda(rankings: Sequence[Sequence[str]]) -> list[str]:
    """Borda count (n − 1 − position points per ranking); ties by doc id."""
    items = _check(rankings)
    points = dict.fromkeys(items, 0)
    for ranking in rankings:
        for p, d in enumerate(ranking):
            points[d] += len(ranking) - 1 - p
    return sorted(items, key=lambda d: (-points[d], d))


def rrf_consensus(rankings: Sequence[Sequence[str]], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of rankings (Cormack et al., 2009); ties by doc id."""
    items = _check(rankings)
    score = dict.fromkeys(items, 0.0)
    for ranking in rankings:
        for p, d in enumerate(ranking):
            score[d] += 1.0 / (k + p + 1)
    return sorted(items, key=lambda d: (-score[d], d))


def kemeny(rankings: Sequence[Sequence[str]]) -> list[str]:
    """A Kemeny-optimal consensus ranking, best first (exact; meant for window-sized lists, n <= 20)."""
    items = _check(rankings)
    if len(items) <= 2:
        return borda(rankings)
    pairs, cost = _kemeny_costs(rankings, items)
    # No cost is zero (integer counts plus ±eps, eps < 1), so orienting each pair its cheaper way is the one
    # minimum of the programme without its transitivity constraints; when that tournament is transitive (its
    # win counts are 0 … n − 1) it is the programme's one optimum, found without solving it (most PermSC
    # windows of the default run, whose reranked lists mostly agree); the MILP solves the rest
    return _transitive_order(items, pairs, (cost < 0).astype(int)) or _kemeny_milp(items, pairs, cost)


def _kemeny_costs(rankings: Sequence[Sequence[str]], items: list[str]) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The pairs (i < j) of the Kemeny programme and the cost of putting i before j in each."""
    counts = pairwise_counts(rankings, items)
    pairs = list(combinations(range(len(items)), 2))
    # x_ij = 1 puts i before j: it costs the rankings that put j first, C[j, i]; x_ij = 0 costs C[i, j].
    # Constant part Σ C[i, j] dropped; secondary: distance to the Borda order, scaled below 1 in total.
    ref = {d: p for p, d in enumerate(borda(rankings))}
    eps = 1.0 / (len(pairs) + 1)
    return pairs, np.array([counts[j, i] - counts[i, j] + eps * (1.0 if ref[items[i]] > ref[items[j]] else -1.0)
                            for i, j in pairs])


def _kemeny_milp(items: list[str], pairs: list[tuple[int, int]], cost: np.ndarray) -> list[str]:
    """The Kemeny programme's optimum, solved as a 0/1 MILP by HiGHS."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    var = {pair: v for v, pair in enumerate(pairs)}
    rows, cols, vals = [], [], []
    row = 0
    for i, j, k in combinations(range(len(items)), 3):
        # i<j<k: 0 <= x_ij + x_jk - x_ik <= 1 forbids exactly the two cyclic orders of the triple
        for v, coef in ((var[(i, j)], 1.0), (var[(j, k)], 1.0), (var[(i, k)], -1.0)):
            rows.append(row)
            cols.append(v)
            vals.append(coef)
        row += 1
    a = coo_matrix((vals, (rows, cols)), shape=(row, len(pairs))).tocsr()
    result = milp(cost, constraints=[LinearConstraint(a, 0.0, 1.0)], integrality=np.ones(len(pairs)),
                  bounds=Bounds(0, 1))
    if not result.success:
        raise RuntimeError(f"Kemeny MILP failed: {result.message}")
    order = _transitive_order(items, pairs, np.round(result.x).astype(int))
    if order is None:  # the triple constraints make every feasible point transitive
        raise RuntimeError("Kemeny MILP returned a cyclic tournament")
    return order


def _transitive_order(items: list[str], pairs: list[tuple[int, int]], x: np.ndarray) -> list[str] | None:
    """The ranking a tournament (x_ij = 1: items[i] before items[j]) describes, or None where it has a cycle:
    a tournament is transitive exactly when its items beat 0, 1, …, n − 1 others."""
    wins = np.zeros(len(items), dtype=int)
    for (i, j), v in zip(pairs, x):
        wins[i if v else j] += 1
    if sorted(wins) != list(range(len(items))):
        return None
    return [items[i] for i in np.argsort(-wins)]


def local_search(ranking: Sequence[str], rankings: Sequence[Sequence[str]]) -> list[str]:
    """Improve ``ranking`` by moving single items while the total Kendall distance drops.

    For lists longer than the exact solver is meant for; start it from :func:`borda`.
    """
    items = sorted(ranking)
    counts = pairwise_counts(rankings, items)
    index = {d: i for i, d in enumerate(items)}
    order = [index[d] for d in ranking]
    improved = True
    while improved:
        improved = False
        for p in range(len(order)):
            item = order[p]
            rest = order[:p] + order[p + 1:]
            # cost of placing ``item`` at q: rankings preferring an item after it that now precedes it, etc.
            before = np.array([counts[item, other] for other in rest])  # rankings with item before other
            after = np.array([counts[other, item] for other in rest])
            # placing at q: rest[:q] precede item (costs before[:q]), rest[q:] follow (costs after[q:])
            cost = np.concatenate([[0], np.cumsum(before)]) + np.concatenate([np.cumsum(after[::-1])[::-1], [0]])
            q = int(np.argmin(cost))
            if cost[q] < cost[p]:
                order = rest[:q] + [item] + rest[q:]
                improved = True
    return [items[i] for i in order]


# The counters CapCal keeps per order (posbias.debias.wrappers.CapCalDebiased) and the rerank summary
# reads (posbias.permuted_eval.capcal_alpha_summary).
CAPCAL_COUNTERS = ("capcal_steps", "capcal_adaptive_steps", "capcal_at_cap", "capcal_alpha_sum", "capcal_alpha_sq_sum")


def capcal_alpha(p_real: Sequence[float], c: float = 1.0, alpha_max: float = 1.0) -> float:
    """CapCal's entropy-adaptive α = min(c·H/ln|C|, α_max), H the entropy in nats of the renormalised
    P(· | x) over the |C| current candidates: a flat distribution (H = ln|C|) is corrected most, a
    confident one little. The form and the constants are ours (the paper states only the direction);
    with c = α_max the cap is reached only by a uniform P, so α follows the entropy."""
    p = np.asarray(p_real, dtype=float)
    p = p / p.sum()
    if len(p) < 2:
        return 0.0
    nz = p[p > 0]
    entropy = float(-(nz * np.log(nz)).sum())
    return min(c * entropy / math.log(len(p)), alpha_max)


def capcal_scores(p_real: Sequence[float], p_empty: Sequence[float], alpha: float | None = None,
                  c: float = 1.0, alpha_max: float = 1.0) -> list[float]:
    """Calibrated scores S(d) = P(d | x) − α·(P(d | x_empty) − 1/|C|) over the current candidates C.

    ``p_real`` and ``p_empty`` are probabilities over the same candidates (renormalised here).
    ``alpha=None`` is entropy-adaptive (:func:`capcal_alpha` with ``c`` and ``alpha_max``).
    """
    p = np.asarray(p_real, dtype=float)
    q = np.asarray(p_empty, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError("p_real and p_empty must be 1-d and of equal length")
    p = p / p.sum()
    q = q / q.sum()
    if alpha is None:
        alpha = capcal_alpha(p, c, alpha_max)
    return (p - alpha * (q - 1.0 / len(p))).tolist()


def capcal_slot_scores(s_real: Sequence[float], s_empty: Sequence[float], alpha: float) -> list[float]:
    """CapCal on a pointwise Grades scorer's window: S(d_i) = s(d_i | x) − α·(s_i(x_empty) − mean_j s_j(x_empty)).

    ``s_real`` are the window's scores (E[g]/3) in slot order, ``s_empty`` the same slots' scores with every
    passage replaced by the placeholder: the slot's content-free prior. Its departure from the window's mean
    content-free score is the slot effect removed; the mean stays, so the scores keep their level for a
    threshold. This is CapCal's formula with the scores in place of P(d | ·) and the window's mean prior in
    place of 1/|C| (the OC-SFT paper names "CapCal logit 校准" as a prompt-side fix but not its form)."""
    p = np.asarray(s_real, dtype=float)
    q = np.asarray(s_empty, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError("s_real and s_empty must be 1-d and of equal length")
    return (p - alpha * (q - q.mean())).tolist()


def bsc(scores_over_perms: dict[str, list[float]]) -> list[str]:
    """Documents best first by their mean score over the presentations; ties by doc id."""
    if not scores_over_perms:
        return []
    means = {d: float(np.mean(s)) for d, s in scores_over_perms.items()}
    return sorted(means, key=lambda d: (-means[d], d))


EXACT_KEMENY_MAX = 20  # exact Kemeny up to this many items; beyond, local Kemenisation from Borda


def _kemeny_or_local(rankings: Sequence[Sequence[str]]) -> list[str]:
    """Kemeny's ranking: exact for at most :data:`EXACT_KEMENY_MAX` items, local Kemenisation of the Borda ranking
    beyond (single-item moves while the total Kendall distance drops; bench/kemeny_gap.py measures its gap to the
    exact optimum)."""
    if len(rankings[0]) <= EXACT_KEMENY_MAX:
        return kemeny(rankings)
    return local_search(borda(rankings), rankings)


# PermSC's rank aggregations by name (``reranking.permsc_aggregation``; config/schema.yaml's enum lists the same
# names, a test checks): each takes several rankings of the same items and returns their central ranking
AGGREGATIONS: dict[str, Callable[[Sequence[Sequence[str]]], list[str]]] = {
    "kemeny": _kemeny_or_local, "borda": borda, "rrf": rrf_consensus}


def aggregate(rankings: Sequence[Sequence[str]], method: str) -> list[str]:
    """PermSC's central ranking of several rankings of the same items by the aggregation ``method``
    (:data:`AGGREGATIONS`: Kemeny-optimal by default; Borda or RRF as cheaper choices)."""
    if method not in AGGREGATIONS:
        raise ValueError(f"aggregation {method!r}: use one of {', '.join(AGGREGATIONS)}")
    return list(_aggregated(tuple(map(tuple, rankings)), method))


@functools.lru_cache(maxsize=4096)
def _aggregated(rankings: tuple[tuple[str, ...], ...], method: str) -> tuple[str, ...]:
    """:func:`aggregate`, memoised: a stability job aggregates the same lists again (PermSC@n's first group is the
    first n draws an adaptive budget aggregates), and an exact Kemeny ranking is an integer programme (measured:
    two thirds of the default run's PermSC stability job in HiGHS). Every aggregation here is deterministic, so a
    repeat returns what recomputing would."""
    return tuple(AGGREGATIONS[method](rankings))
