"""Sliding windows for listwise reranking of lists longer than the model's window.

Windows are visited back to front (from the tail of the first-stage list towards its head), each
window's reranked order is written back before the next one is formed, so strong passages bubble
up. :func:`sliding_windows` always ends with a window that starts at position 0: the reference
loop ``while start >= 0: ...; start -= step`` stops early when ``(n - window)`` is not a multiple of
``step`` and leaves the head of the list unranked (e.g. n = 25, window 20, step 10 visits only
[5, 25)); here that case visits [5, 25) and then [0, 20). Every window has ``min(window, n)``
passages (the list size the model was trained on); the last one moves by at most ``step``.
"""

from __future__ import annotations

import math
from itertools import accumulate


def sliding_windows(n: int, window: int = 20, step: int = 10) -> list[tuple[int, int]]:
    """Half-open ``[start, end)`` windows over ``n`` items, in visit order (back to front)."""
    if window < 1 or step < 1:
        raise ValueError(f"window ({window}) and step ({step}) must be positive")
    if step > window:
        raise ValueError(f"step ({step}) larger than window ({window}) would skip passages")
    if n <= 0:
        return []
    out = []
    end = n
    while end - window > 0:
        out.append((end - window, end))
        end -= step
    out.append((0, min(window, n)))
    return out


def round_robin(n: int, window: int) -> tuple[list[int], list[tuple[int, int]]]:
    """Round-robin windowing of a pointwise scorer's list: the i-th presented passage goes to window
    i mod W, W = ⌈n / window⌉, so each window draws its companions from the whole list (head, middle
    and tail together) instead of a contiguous slice. Returns (the presented positions in window order,
    the half-open ranges of each window in that order); within a window the passages keep their
    presented order."""
    if window < 1:
        raise ValueError(f"window ({window}) must be positive")
    w = max(1, math.ceil(n / window))
    order = [i for k in range(w) for i in range(k, n, w)]
    bounds = list(accumulate((len(range(k, n, w)) for k in range(w)), initial=0))
    return order, [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
