"""Adaptive permutation budgets: draw shuffled presentations one at a time and stop when the aggregate stops
changing (beyond the papers; ``docs/fidelity.md``).

PermSC@K and BSC@K pay K model passes per query whatever the model. The adaptive versions draw the same
seeded shuffles in the same order, aggregate after every draw (BSC: the mean scores; PermSC: the central
ranking of the lists so far) and stop at the first draw n after which the aggregate's top ``depth`` set has
been the same for ``patience`` consecutive draws, or at the cap K.
A model whose rankings do not move with the order stops after ``patience`` + 1 draws; an unstable one
pays up to K. Because the draws are the fixed-K method's own, in its order, the adaptive aggregate is
exactly what a sequential run would return, so the workflow computes it from the K reranked shuffles it
already has and counts the draws the rule would have made (``stopping_draw``).

What must settle is the aggregate's top-``depth`` *set* (the documents a reader of the top ``depth`` keeps),
not its order: measured on the default run's simulated scorers, an ordered top 10 of mean scores over 100
candidates almost never holds for two draws, so the rule would always pay the cap.

The rule is ours (paper: silent). Recent work on adaptive permutation voting reports large savings; the
toy's measured savings are in the closing note of 0.15.0 and in the frontier table's calls column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from posbias.debias import maths

FIXED, ADAPTIVE = "fixed", "adaptive"  # a stability row's permutation budget: K draws, or adaptive up to K


def label(combine: str, k: int, budget: str) -> str:
    """How a budgeted method prints: ``bsc@K`` (K draws) or ``bsc@≤K adaptive`` (adaptive, capped at K)."""
    return f"{combine}@{k}" if budget == FIXED else f"{combine}@≤{k} {ADAPTIVE}"


def settled(aggregates: Sequence[Sequence[str]], patience: int, depth: int) -> bool:
    """Whether the last ``patience`` draws changed nothing in the aggregate's top ``depth`` set: the last
    ``patience`` + 1 aggregates keep the same ``depth`` documents on top (in whatever order)."""
    if patience < 1 or depth < 1:
        raise ValueError(f"adaptive: patience {patience} and depth {depth} must be at least 1")
    if len(aggregates) <= patience:
        return False
    last = [set(a[:depth]) for a in aggregates[-(patience + 1):]]
    return all(top == last[0] for top in last[1:])


def stopping_draw(aggregates: Sequence[Sequence[str]], patience: int, depth: int) -> int:
    """The number of draws an adaptive run makes, given ``aggregates[i]``: the aggregate ranking after draw
    i + 1 (best first), over at most the cap K = ``len(aggregates)`` draws: the first n after which the
    aggregate has :func:`settled` (the earliest is n = ``patience`` + 1), else K."""
    if not aggregates:
        raise ValueError("adaptive: no draws to stop among")
    return next((n for n in range(1, len(aggregates) + 1) if settled(aggregates[:n], patience, depth)),
                len(aggregates))


def adaptive_bsc(scores: Sequence[dict[str, float]], patience: int, depth: int) -> tuple[dict[str, float], int]:
    """BSC with an adaptive budget for one query: ``scores[i]`` is draw i's scores (the same documents in
    each). Returns (each document's mean score over the draws made, the number of draws)."""
    docs = sorted(scores[0])
    matrix = np.array([[s[d] for d in docs] for s in scores], dtype=float)
    means = np.cumsum(matrix, axis=0) / np.arange(1, len(scores) + 1)[:, None]
    aggregates = [maths.bsc({d: [m] for d, m in zip(docs, row)}) for row in means]
    n = stopping_draw(aggregates, patience, depth)
    return dict(zip(docs, matrix[:n].mean(axis=0).tolist())), n  # as BSC@n averages: np.mean of the n draws


def adaptive_permsc(rankings: Sequence[Sequence[str]], aggregation: str, patience: int,
                    depth: int) -> tuple[list[str], int]:
    """PermSC with an adaptive budget for one query: ``rankings[i]`` is draw i's reranked list. Returns
    (the central ranking of the lists drawn, the number of draws). Each prefix's central ranking is
    computed as PermSC@n would (:func:`posbias.debias.maths.aggregate`); one list is its own centre."""
    aggregates: list[list[str]] = []
    for n in range(1, len(rankings) + 1):
        aggregates.append(list(rankings[0]) if n == 1 else maths.aggregate(rankings[:n], aggregation))
        if settled(aggregates, patience, depth):
            break  # a sequential run stops here: later draws are never made
    return aggregates[-1], len(aggregates)
