"""Inference-time debiasing around any reranker: PermSC, BSC, round-robin windowing, marker renaming
and CapCal (registered in :mod:`posbias.debias.catalog`, which parses the ``debias`` wildcard and builds
these wrappers).

- ``permsc-window@K``: rerank K seeded shuffles of each *window* and aggregate the K rankings
  (:func:`posbias.debias.maths.aggregate`: Kemeny-optimal by default; Borda or RRF as cheaper choices).
  The papers' PermSC aggregates K reranked *full lists* instead: ``permsc@K``,
  :mod:`posbias.debias.list_level`, which needs no wrapper.
- ``bsc@K``: the mean of each passage's score over K seeded shuffles, sorted (score-producing
  models); Borda over the K rankings for generation models.
- ``roundrobin@R``: slot rotation, a prompt-side alternative: R cyclic rotations of each window,
  spread evenly over its slots, aggregated like BSC (pointwise) or PermSC (listwise); the companions
  stay those of the window.
- ``roundrobin-windows``: round-robin windowing, the paper's reading of "round-robin 分窗" (a rule for
  which passages share a window): a pointwise list is cut so that passage i of the presentation is in
  window i mod W (:func:`posbias.windows.round_robin`), one pass, no extra calls.
- ``rename@K``: marker renaming, a prompt-side alternative and, at K = 1, a sensitivity probe: K seeded
  relabellings of a pointwise Grades window's markers ``[1] … [B]``, scores averaged.
- ``skeleton@NAME``: the skeleton probe: a pointwise Grades window read with another answer skeleton.
- ``capcal``: content-agnostic probability calibration, on the content-free priors the base gives
  (:attr:`Reranker.priors`): one step per window for models with per-passage probabilities (First,
  simulated); per decoding step, constrained, for generation models; per slot, with a fixed α, for
  pointwise Grades scorers (:func:`posbias.debias.maths.capcal_slot_scores`).

The K views of all windows in a batch go to the base reranker together, so batching still applies.
View seeds derive from the config seed, the query id, the window's doc ids and the view index.
A wrapper declares the same capabilities as its base (``pointwise``, ``window``, ``decodes``) and
shares its ``stats``.
"""

from __future__ import annotations

import numpy as np

from posbias.debias import maths
from posbias.permute import derive_seed, fisher_yates
from posbias.rerankers.base import Reranker, Window, WindowResult, by_score


class _Wrapper(Reranker):
    """A reranker around ``base`` with the base's capabilities and counters."""

    def __init__(self, base: Reranker):
        super().__init__()
        self.base = base
        self.pointwise, self.window, self.windowing, self.stats = base.pointwise, base.window, base.windowing, base.stats
        self.batches_itself, self.decodes = base.batches_itself, base.decodes


class PermutationDebiased(_Wrapper):
    """K shuffled views per window, aggregated: their rankings (PermSC per window), or with
    ``average_scores`` the mean score of each passage (BSC; Borda for models without scores)."""

    def __init__(self, base: Reranker, k: int, seed: int, aggregation: str, average_scores: bool):
        if k < 1:
            raise ValueError("K must be at least 1")
        super().__init__(base)
        self.k, self.seed, self.aggregation, self.average_scores = k, seed, aggregation, average_scores

    def _views(self, window: Window) -> list[Window]:
        """The K views of one window: seeded shuffles of its slots."""
        n = len(window.doc_ids)
        return [_arranged(window, fisher_yates(range(n), derive_seed(self.seed, "view", window.query_id,
                                                                        *window.doc_ids, j)))
                for j in range(self.k)]

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        plans = [self._views(w) for w in windows]
        results = iter(self.base.rank([view for plan in plans for view in plan]))
        out = []
        for window, mine_views in zip(windows, plans):
            mine = [next(results) for _ in mine_views]
            index = {d: i for i, d in enumerate(window.doc_ids)}
            if self.average_scores and all(r.scores is not None for r in mine):
                per_doc: dict[str, list[float]] = {d: [] for d in window.doc_ids}
                for view, res in zip(mine_views, mine):
                    for d, s in zip(view.doc_ids, res.scores):
                        per_doc[d].append(s)
                ranking = maths.bsc(per_doc)
                scores = [float(np.mean(per_doc[d])) for d in window.doc_ids]
            else:
                rankings = [[view.doc_ids[i] for i in res.order] for view, res in zip(mine_views, mine)]
                ranking = maths.borda(rankings) if self.average_scores else maths.aggregate(rankings, self.aggregation)
                scores = None
            cost = {key: sum(r.stats.get(key, 0) for r in mine) for key in ("calls", "prompt_tokens")}
            out.append(WindowResult(order=[index[d] for d in ranking], scores=scores, stats=cost))
        return out


def _arranged(window: Window, perm: list[int]) -> Window:
    """``window`` with its slots in the order ``perm`` (indices into the window)."""
    return Window(window.query_id, window.query, [window.doc_ids[i] for i in perm], [window.texts[i] for i in perm])


class RoundRobin(PermutationDebiased):
    """Slot rotation (``roundrobin@R``): each window in R cyclic rotations of its slots, the offsets spread evenly
    (⌊j·n/R⌋, j < R; every rotation once when R ≥ n), aggregated like BSC (scores averaged) or PermSC
    (rankings aggregated). With R = n every passage visits every slot once and keeps its companions, so
    a score that depends on the passage, its slot and the window's set becomes order-free."""

    def _views(self, window: Window) -> list[Window]:
        n = len(window.doc_ids)
        offsets = sorted({j * n // self.k for j in range(self.k)})
        return [_arranged(window, [(i + o) % n for i in range(n)]) for o in offsets]


class RoundRobinWindowing(_Wrapper):
    """Round-robin windowing (``roundrobin-windows``): the base scorer unchanged, its list cut into
    windows round-robin instead of in contiguous slices (:attr:`Reranker.windowing`), so which passages
    share a window changes with the presentation but not by rank band. Pointwise scorers only (a
    sliding listwise window moves passages between windows as it goes)."""

    def __init__(self, base: Reranker):
        if not base.pointwise:
            raise ValueError(f"round-robin windowing cuts a pointwise scorer's list; {type(base).__name__} is listwise")
        super().__init__(base)
        self.windowing = "round_robin"

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        return self.base.rank(windows)


class MarkerRenamed(PermutationDebiased):
    """Marker renaming: each window in K seeded relabellings of its slots (a permutation of the markers
    ``1 … n`` of the Grades prompt, in the documents and the answer skeleton alike), the slots and
    companions unchanged, scores averaged. K = 1 is the sensitivity probe: how much relabelling
    alone moves the scores. Pointwise scorers only; those without a prompt (simulated) ignore markers."""

    def __init__(self, base: Reranker, k: int, seed: int, aggregation: str, average_scores: bool):
        if not base.pointwise:
            raise ValueError(f"marker renaming relabels the pointwise Grades prompt; {type(base).__name__} is listwise")
        super().__init__(base, k, seed, aggregation, average_scores)

    def _views(self, window: Window) -> list[Window]:
        n = len(window.doc_ids)
        return [Window(window.query_id, window.query, window.doc_ids, window.texts,
                       tuple(fisher_yates(range(1, n + 1), derive_seed(self.seed, "markers", window.query_id,
                                                                       *window.doc_ids, j))))
                for j in range(self.k)]


class SkeletonSwapped(_Wrapper):
    """The skeleton probe (``skeleton@NAME``): each window read with answer skeleton ``NAME``
    (:data:`posbias.prompts.SKELETONS`) instead of the paper's, the slots, markers and companions unchanged:
    how much the skeleton alone moves the scores. Pointwise scorers only; those without a prompt
    (simulated) ignore skeletons."""

    def __init__(self, base: Reranker, skeleton: str):
        if not base.pointwise:
            raise ValueError(f"the skeleton probe reads the pointwise Grades prompt; {type(base).__name__} is listwise")
        super().__init__(base)
        self.skeleton = skeleton

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        return self.base.rank([Window(w.query_id, w.query, w.doc_ids, w.texts, w.markers, self.skeleton)
                               for w in windows])


class CapCalDebiased(_Wrapper):
    """CapCal with a fixed α or the entropy-adaptive one (α=None), on the content-free priors the base
    gives (:attr:`Reranker.priors`: per window, or per decoding step).

    It counts in the shared ``stats`` each calibration step's α (``capcal_steps``, ``capcal_alpha_sum``,
    ``capcal_alpha_sq_sum``) and, for the adaptive α, the steps where it sat at its cap α_max
    (``capcal_adaptive_steps``, ``capcal_at_cap``): the CapCal table reports α's mean, spread and share
    at the cap, so a constant over-correction shows."""

    def __init__(self, base: Reranker, alpha: float | None, c: float, alpha_max: float, placeholder: str):
        if base.priors is None:
            raise ValueError(f"{type(base).__name__} gives no content-free priors (per window or per decoding step), "
                             "which CapCal calibrates against")
        if base.priors == "per_slot" and alpha is None:
            raise ValueError(f"CapCal on {type(base).__name__}: the entropy-adaptive α reads an answer distribution "
                             "over the window's identifiers, which a Grades scorer does not give; set a fixed alpha "
                             "(reranking.capcal.alpha, or a variant's alpha for capcal@NAME)")
        super().__init__(base)
        self.placeholder, self.alpha, self.c, self.alpha_max = placeholder, alpha, c, alpha_max
        for key in maths.CAPCAL_COUNTERS:
            self.stats.setdefault(key, 0)

    def calibrate(self, p_real, p_empty) -> list[float]:
        """The calibrated scores of one step, its α counted."""
        alpha = self.alpha
        if alpha is None:
            alpha = maths.capcal_alpha(p_real, self.c, self.alpha_max)
            self.stats["capcal_adaptive_steps"] += 1
            self.stats["capcal_at_cap"] += int(alpha >= self.alpha_max)
        self.stats["capcal_steps"] += 1
        self.stats["capcal_alpha_sum"] += alpha
        self.stats["capcal_alpha_sq_sum"] += alpha * alpha
        if self.base.priors == "per_slot":
            return maths.capcal_slot_scores(p_real, p_empty, alpha)
        return maths.capcal_scores(p_real, p_empty, alpha=alpha)

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        if self.base.priors == "per_step":
            return self.base.rank_with_priors(windows, self.calibrate, self.placeholder)
        out = []
        for p_real, p_empty, cost in self.base.content_free_inputs(windows, self.placeholder):
            s = self.calibrate(p_real, p_empty)
            out.append(WindowResult(order=by_score(s), scores=s, stats=cost))
        return out
