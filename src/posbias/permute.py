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
