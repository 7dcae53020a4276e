"""The reranker interface every reranker implements (listwise, pointwise and the debiasing wrappers).

A reranker takes a batch of windows and returns, per window, a best-first order (and per-passage
scores where it has them). Its capabilities are declared, not probed:

- ``pointwise``: it scores each passage independently of the list's later windows (the Grades
  scorer); :func:`posbias.rerank.rerank` then cuts lists into contiguous windows of ``window``
  passages and sorts the whole list by score, instead of sliding.
- ``window``: the passages per window it wants (None: the experiment's ``reranking.window``).
- ``windowing``: how a pointwise scorer's list is cut into windows, a key of
  :data:`posbias.rerank.WINDOWINGS`: ``"contiguous"`` slices, or ``"round_robin"`` (passage i in
  window i mod W; :class:`posbias.debias.wrappers.RoundRobinWindowing`).
- ``decodes``: it generates its answer token by token, so its model calls per window depend on what
  the model writes (the compute plan counts them as estimates).
- ``priors``: the content-free priors it gives (what calibration such as CapCal needs of the model's
  internals): ``"per_window"`` (:meth:`Reranker.content_free_inputs`: the answer distribution of a
  window and of the same prompt with content-free passages) or ``"per_step"``
  (:meth:`Reranker.rank_with_priors`: decoding one identifier at a time, each step's distribution and
  the window's content-free prior, read once and renormalised over the remaining identifiers, handed to
  a function that picks the step's scores), ``"per_slot"`` (a
  pointwise scorer: :meth:`Reranker.content_free_inputs` gives each slot's score and the same slot's
  score with content-free passages), or None.
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
    ``1 … n``); marker renaming (:mod:`posbias.debias.wrappers`) sets them. ``skeleton``: the Grades
    prompt's answer skeleton (None: the paper's, :data:`posbias.prompts.SKELETONS`); the skeleton probe
    sets it. Models without such a prompt (listwise, simulated) ignore both.
    """

    query_id: str
    query: str
    doc_ids: list[str]
    texts: list[str]
    markers: tuple[int, ...] | None = None
    skeleton: str | None = None


@dataclass(frozen=True)
class BuildContext:
    """What building a reranker may read besides its ``models:`` entry: the model folder or HF id
    (``path``, causal LMs), the qrels grades (simulated models), the seed, the device, the passage word
    budget, and a (tokenizer, model) already at hand (``loaded``; ``(tokenizer, None)`` counts calls and
    prompt tokens without running a model, :mod:`posbias.plan`)."""

    path: str | None
    grades: dict[str, dict[str, int]]
    seed: int
    device: str
    word_budget: int
    loaded: tuple | None = None


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
    decodes: bool = False
    priors: str | None = None  # None | "per_window" | "per_step" | "per_slot"
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

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> Reranker:
        """The reranker a validated ``models:`` entry describes (:func:`posbias.rerankers.build`)."""
        raise NotImplementedError(f"{cls.__name__} is not built from a models entry")

    def content_free_inputs(self, windows: list[Window],
                            placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """``priors == "per_window"``: (P(d | x), P(d | x_empty), cost) per window, x_empty the prompt with
        every passage replaced by ``placeholder``; ``"per_slot"``: (the slots' scores, the same slots' scores
        on x_empty, cost)."""
        raise NotImplementedError(f"{type(self).__name__} gives no per-window content-free priors")

    def rank_with_priors(self, windows: list[Window], adjust: Callable, placeholder: str) -> list[WindowResult]:
        """``priors == "per_step"``: decode the ranking one identifier at a time; at each step
        ``adjust(p_real, p_empty)`` turns the step's distribution and the window's content-free prior (read
        once per window, renormalised over the identifiers still to place) into the scores the step picks
        from."""
        raise NotImplementedError(f"{type(self).__name__} gives no per-step content-free priors")
