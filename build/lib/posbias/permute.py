"""Seeded permutations of candidate lists.

:func:`fisher_yates` is the one shuffle used everywhere (evaluation orders, augmentation, listwise
training sets), so that a seed means the same permutation in every stage. It is written out rather
than delegated to ``numpy.random.Generator.permutation`` because the algorithm is part of the
protocol (the papers specify a Fisher–Yates shuffle) and must not change with a numpy release;
the random draws themselves come from numpy's PCG64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def fisher_yates(items: Sequence[T], seed: int) -> list[T]:
    """A uniformly random permutation of ``items``, determined by ``seed`` (Durstenfeld's variant)."""
    out = list(items)
    rng = np.random.Generator(np.random.PCG64(seed))
    for i in range(len(out) - 1, 0, -1):
        j = int(rng.integers(0, i + 1))
        out[i], out[j] = out[j], out[i]
    return out


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the config seed and any job/query identifiers (stable across runs and hosts)."""
    import hashlib

    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def move_to_position(items: Sequence[T], item: T, position: int) -> list[T]:
    """``items`` with ``item`` moved to 0-based ``position``, the others keeping their relative order."""
    rest = [x for x in items if x != item]
    if len(rest) != len(items) - 1:
        raise ValueError(f"{item!r} occurs {len(items) - len(rest)} times; it must occur once")
    if not 0 <= position <= len(rest):
        raise ValueError(f"position {position} outside 0..{len(rest)}")
    return rest[:position] + [item] + rest[position:]
