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

from dataclasses import dataclass

from posbias.permute import derive_seed, fisher_yates, move_to_position

# The order grammar: kind -> (takes an index, what it means). Everything that names orders (the
# wildcard constraint, the config checks, table labels) is derived from this.
ORDER_KINDS: dict[str, tuple[bool, str]] = {
    "original": (False, "the first-stage order"),
    "shuffled": (True, "seeded shuffle number <s> (0-based)"),
    "position": (True, "the top-k with its best relevant passage moved to input position <p> (1-based)"),
}
PATTERN = "|".join(f"{kind}-\\d+" if indexed else kind for kind, (indexed, _) in ORDER_KINDS.items())
GRAMMAR = ", ".join(f"{kind}-<n>" if indexed else kind for kind, (indexed, _) in ORDER_KINDS.items())


@dataclass(frozen=True)
class Order:
    kind: str  # original | shuffled | position
    index: int | None = None  # shuffle index, or 1-based position

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}-{self.index}"


def parse(order: str) -> Order:
    """The :class:`Order` an ``order`` wildcard value names; ValueError with the grammar otherwise."""
    kind, _, index = order.partition("-")
    indexed = ORDER_KINDS.get(kind, (None,))[0]
    if indexed is None or indexed != bool(index) or (index and not (index.isascii() and index.isdigit())):
        raise ValueError(f"order {order!r}: expected one of {GRAMMAR}")
    if kind == "position" and int(index) < 1:
        raise ValueError(f"order {order!r}: positions are 1-based")
    return Order(kind, int(index) if index else None)


ORIGINAL = "original"


def shuffled(index: int) -> str:
    """The name of shuffled order ``index`` (0-based)."""
    return str(Order("shuffled", index))


def position(p: int) -> str:
    """The name of position order ``p`` (1-based)."""
    return str(Order("position", p))


def prefix(kind: str) -> str:
    """What every name of an indexed ``kind`` starts with (for column filters: ``str.starts_with``)."""
    if not ORDER_KINDS[kind][0]:
        raise ValueError(f"order kind {kind!r} takes no index")
    return f"{kind}-"


def is_kind(name: str, kind: str) -> bool:
    """Whether the order called ``name`` is of ``kind`` (``original``, ``shuffled``, ``position``), by its name
    alone (no check of the rest: the config checks call it before :func:`parse` reports a bad name)."""
    return name.startswith(prefix(kind)) if ORDER_KINDS[kind][0] else name == kind


def index_of(name: str) -> int:
    """The shuffle index or 1-based position in an indexed order's name."""
    return int(name.partition("-")[2])


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
