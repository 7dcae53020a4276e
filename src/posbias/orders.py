"""Evaluation orders: how the first-stage candidates are presented to a reranker.

An ``order`` wildcard value is one of

- ``original``: the first-stage order;
- ``shuffled-<s>``: a seeded Fisher–Yates shuffle of the candidates, shuffle index ``s`` (0 … M−1);
  the per-query seed is derived from the config seed, ``s`` and the query id, and is recorded;
- ``position-<p>``: the controlled protocol of the DebiasFirst paper: for a query with a relevant
  passage in the first-stage top ``k`` (20), take that top ``k`` and move its highest-ranked
  relevant passage to input position ``p`` (1-based), the others keeping their relative order.
  Queries without a relevant passage in the top ``k`` are skipped (counted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from posbias.permute import derive_seed, fisher_yates, move_to_position

_ORDER = re.compile(r"^(original|shuffled-(\d+)|position-(\d+))$")


@dataclass(frozen=True)
class Order:
    kind: str  # original | shuffled | position
    index: int | None = None  # shuffle index, or 1-based position

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}-{self.index}"


def parse(order: str) -> Order:
    match = _ORDER.match(order)
    if not match:
        raise ValueError(f"order {order!r}: expected original, shuffled-<seed> or position-<p>")
    if match.group(2) is not None:
        return Order("shuffled", int(match.group(2)))
    if match.group(3) is not None:
        if int(match.group(3)) < 1:
            raise ValueError(f"order {order!r}: positions are 1-based")
        return Order("position", int(match.group(3)))
    return Order("original")


def shuffle_seed(root_seed: int, index: int, query_id: str) -> int:
    return derive_seed(root_seed, "shuffle", index, query_id)


def present(doc_ids: list[str], order: Order, root_seed: int, query_id: str, relevant: set[str],
            k: int = 20) -> list[str] | None:
    """The candidate list in the given order, or None when a position order does not apply."""
    if order.kind == "original":
        return list(doc_ids)
    if order.kind == "shuffled":
        return fisher_yates(doc_ids, shuffle_seed(root_seed, order.index, query_id))
    top = list(doc_ids[:k])
    if order.index > len(top):
        return None
    target = next((d for d in top if d in relevant), None)
    if target is None:
        return None
    return move_to_position(top, target, order.index - 1)
