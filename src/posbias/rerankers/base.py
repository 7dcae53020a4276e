"""The reranker interface every reranker implements (listwise, pointwise and the debiasing wrappers).

A reranker takes a batch of windows and returns, per window, a best-first order (and per-passage
scores where it has them). Its capabilities are declared, not probed:

- ``pointwise``: it scores each passage independently of the list's later windows (the Grades
  scorer); :func:`posbias.rerank.rerank` then cuts lists into contiguous windows of ``window``
  passages and sorts the whole list by score, instead of sliding.
- ``window``: the passages per window it wants (None: the experiment's ``reranking.window``).
- ``windowing``: how a pointwise scorer's list is cut into windows, a key of
  :data:`posbias.rerank.WINDOWINGS`: ``"contiguous"`` slices, or ``"round_robin"`` (passage i in
  window i mod W; :class:`posbias.rerankers.debiased.RoundRobinWindowing`).
- ``capcal``: how it supports CapCal: ``"single_step"`` (it implements
  :meth:`Reranker.calibration_inputs`), ``"sequential"`` (:meth:`Reranker.rank_calibrated`), or None.
- ``batches_itself``: its engine batches and schedules requests itself (vLLM, :mod:`posbias.engines`):
  :func:`posbias.rerank.rerank` hands it a whole round of windows at once instead of ``batch_size``.
- ``stats``: counters since the last :meth:`Reranker.reset_stats` (forward passes, prompt tokens,
  truncations, …), reported per order in the stats JSON.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Window:
    """One window of one query, in input order.

    ``markers``: the numbers a pointwise Grades prompt labels its slots with, in slot order (None:
    ``1 … n``); marker renaming (:mod:`posbias.rerankers.debiased`) sets them, models without such a
    prompt (listwise, simulated) ignore them.
    """

    query_id: str
    query: str
    doc_ids: list[str]
    texts: list[str]
    markers: tuple[int, ...] | None = None


@dataclass
class WindowResult:
    """``order``: indices into the window, best first; ``scores``: per input position, if the model has them.

    ``stats`` carries the window's cost: ``calls`` (model forward passes spent on it; a batched pass
    counts once per window in the batch, a decoding step once per step) and ``prompt_tokens``,
    plus model-specific counters (``missing_ids``, ``parse_failure``).
    """

    order: list[int]
    scores: list[float] | None = None
    stats: dict[str, int] = field(default_factory=dict)


def by_score(scores) -> list[int]:
    """Indices best first by score; ties keep the input order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


class Reranker(ABC):
    """Base of every reranker; subclasses set the capability attributes they have."""

    pointwise: bool = False
    window: int | None = None
    windowing: str = "contiguous"
    capcal: str | None = None  # None | "single_step" | "sequential"
    batches_itself: bool = False

    def __init__(self) -> None:
        self.stats: dict[str, int] = {}

    def reset_stats(self) -> None:
        """Zero the counters in place (wrappers share this dict), so a job that reranks several orders
        with one model reports each order's own."""
        for key in self.stats:
            self.stats[key] = 0

    @abstractmethod
    def rank(self, windows: list[Window]) -> list[WindowResult]:
        """One result per window, in the same order."""

    def calibration_inputs(self, windows: list[Window], placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """Single-step CapCal: (P(d | x), P(d | x_empty), cost) per window."""
        raise NotImplementedError(f"{type(self).__name__} does not support single-step CapCal")

    def rank_calibrated(self, windows: list[Window], calibrate: Callable, placeholder: str) -> list[WindowResult]:
        """Sequential CapCal: decode the ranking one identifier at a time through ``calibrate``."""
        raise NotImplementedError(f"{type(self).__name__} does not support sequential CapCal")
