"""Position-aware augmentation of listwise training instances (DebiasFirst).

- ``noaug``: the teacher instances as given (candidates in first-stage order).
- ``randaug``: one seeded uniform shuffle of the candidates per instance (the RankZephyr-style baseline).
- ``posaug``: a seeded Fisher–Yates shuffle, then the k candidates are split into n contiguous
  groups and n variants are emitted, variant r with the groups rotated by r (group r first). Every
  passage therefore visits n distinct group slots. When n does not divide k, the groups follow
  ``numpy.array_split``: the first k mod n groups have one passage more than the others.

The teacher's ranking is a list of doc ids, so it is unchanged by any re-presentation; the gold
rank of each input position (what the losses need) is recomputed from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import polars as pl

from posbias.permute import derive_seed, fisher_yates

T = TypeVar("T")
VARIANTS = ("noaug", "randaug", "posaug")


def groups(items: Sequence[T], n_groups: int) -> list[list[T]]:
    """``items`` split into ``n_groups`` contiguous groups, the first k mod n one item longer."""
    if not 1 <= n_groups <= max(len(items), 1):
        raise ValueError(f"n_groups must be between 1 and the number of items ({len(items)}), got {n_groups}")
    bounds = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(len(items)), n_groups)])
    return [list(items[bounds[g]:bounds[g + 1]]) for g in range(n_groups)]


def rotate_groups(items: Sequence[T], n_groups: int) -> list[list[T]]:
    """The n rotated variants: variant r lists groups r, r+1, …, n−1, 0, …, r−1."""
    parts = groups(items, n_groups)
    return [[x for part in parts[r:] + parts[:r] for x in part] for r in range(n_groups)]


def gold_ranks(doc_ids: Sequence[str], teacher_ranking: Sequence[str]) -> list[int]:
    """0-based gold rank of the passage at each input position."""
    rank = {d: r for r, d in enumerate(teacher_ranking)}
    return [rank[d] for d in doc_ids]


def augment(listwise: pl.DataFrame, variant: str, n_groups: int, seed: int) -> pl.DataFrame:
    """Augmented instances (schema LISTWISE); randaug and posaug instances get ids ``<qid>#<variant>``."""
    if variant not in VARIANTS:
        raise ValueError(f"augmentation {variant!r}: use one of {VARIANTS}")
    rows = []
    for rec in listwise.iter_rows(named=True):
        pairs = list(zip(rec["doc_ids"], rec["texts"]))
        if variant == "noaug":
            views = [pairs]
        elif variant == "randaug":
            views = [fisher_yates(pairs, derive_seed(seed, "randaug", rec["query_id"]))]
        else:
            views = rotate_groups(fisher_yates(pairs, derive_seed(seed, "posaug", rec["query_id"])), n_groups)
        for v, view in enumerate(views):
            rows.append({
                "query_id": rec["query_id"] if variant == "noaug" else f"{rec['query_id']}#{v}",
                "query": rec["query"],
                "doc_ids": [d for d, _ in view],
                "texts": [t for _, t in view],
                "teacher_ranking": rec["teacher_ranking"],
            })
    return pl.DataFrame(rows, schema=listwise.schema)


def position_rank_table(instances: pl.DataFrame) -> pl.DataFrame:
    """Counts of (input position, gold rank) over all passages; rank 0 is the teacher's best."""
    k = max(len(d) for d in instances["doc_ids"].to_list())
    counts = np.zeros((k, k), dtype=np.int64)
    for doc_ids, teacher in zip(instances["doc_ids"].to_list(), instances["teacher_ranking"].to_list()):
        for p, r in enumerate(gold_ranks(doc_ids, teacher)):
            counts[p, r] += 1
    return pl.DataFrame([{"input_position": p, "gold_rank": r, "count": int(counts[p, r])}
                         for p in range(k) for r in range(k)])
