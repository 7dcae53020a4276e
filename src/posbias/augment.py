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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import polars as pl

from posbias import registry
from posbias.permute import derive_seed, fisher_yates

T = TypeVar("T")


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


@dataclass(frozen=True)
class Augmentation:
    """One ``training.<name>.aug``: the views of one instance (its (doc id, text) pairs, the seed, the query id and
    ``augmentation.n_groups`` in; the re-presentations out), how many views it makes of each instance (what the
    compute plan counts), and whether the views keep the instance's query id (else ``<qid>#<view>``)."""

    views: Callable[[list, int, str, int], list[list]]
    count: Callable[[int], int]
    keeps_ids: bool
    description: str


def _shuffled(pairs: list, seed: int, query_id: str, name: str) -> list:
    return fisher_yates(pairs, derive_seed(seed, name, query_id))


# By config name; config/schema.yaml's `aug` enum lists the same names and the augment rule's wildcard is made
# from them (a test checks)
AUGMENTATIONS: dict[str, Augmentation] = {
    "noaug": Augmentation(lambda pairs, seed, qid, n: [pairs], lambda n: 1, True,
                          "the teacher instances as given"),
    "randaug": Augmentation(lambda pairs, seed, qid, n: [_shuffled(pairs, seed, qid, "randaug")], lambda n: 1, False,
                            "one seeded uniform shuffle per instance"),
    "posaug": Augmentation(lambda pairs, seed, qid, n: rotate_groups(_shuffled(pairs, seed, qid, "posaug"), n),
                           lambda n: n, False, "a seeded shuffle, then its n groups rotated: n views"),
}


def augment(listwise: pl.DataFrame, variant: str, n_groups: int, seed: int) -> pl.DataFrame:
    """Augmented instances (schema LISTWISE); the views of an augmentation that re-presents the candidates get
    ids ``<qid>#<view>``."""
    how = registry.entry(AUGMENTATIONS, variant, "augmentation")
    rows = []
    for rec in listwise.iter_rows(named=True):
        pairs = list(zip(rec["doc_ids"], rec["texts"]))
        for v, view in enumerate(how.views(pairs, seed, rec["query_id"], n_groups)):
            rows.append({
                "query_id": rec["query_id"] if how.keeps_ids else f"{rec['query_id']}#{v}",
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
