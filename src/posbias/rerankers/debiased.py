"""Inference-time debiasing around any reranker: PermSC, BSC and CapCal (the ``debias`` wildcard).

- ``permsc@K``: rerank K seeded shuffles of each window and aggregate the K rankings (Kemeny-optimal
  by default; Borda or RRF as cheaper choices; Borda + local search for windows over 20).
- ``bsc@K``: the mean of each passage's score over K seeded shuffles, sorted (score-producing
  models); Borda over the K rankings for generation models.
- ``capcal``: content-agnostic probability calibration. Single step for models with per-passage
  probabilities (First, simulated); sequential constrained decoding for generation models.

The K views of all windows in a batch go to the base reranker together, so batching still applies.
View seeds derive from the config seed, the query id, the window's doc ids and the view index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

import numpy as np

from posbias import debias
from posbias.permute import derive_seed, fisher_yates
from posbias.rerankers import Reranker, Window, WindowResult

_METHOD = re.compile(r"^(none|capcal|permsc@(\d+)|bsc@(\d+))$")


@dataclass(frozen=True)
class DebiasSpec:
    method: str  # none | permsc | bsc | capcal
    k: int = 1

    def __str__(self) -> str:
        return self.method if self.method in ("none", "capcal") else f"{self.method}@{self.k}"


def parse(name: str) -> DebiasSpec:
    match = _METHOD.match(name)
    if not match:
        raise ValueError(f"debias {name!r}: expected none, capcal, permsc@K or bsc@K")
    if match.group(2):
        return DebiasSpec("permsc", int(match.group(2)))
    if match.group(3):
        return DebiasSpec("bsc", int(match.group(3)))
    return DebiasSpec(match.group(1))


class PermutationDebiased:
    """PermSC or BSC: K shuffled views per window, aggregated."""

    def __init__(self, base: Reranker, spec: DebiasSpec, seed: int, aggregation: str = "kemeny"):
        if spec.k < 1:
            raise ValueError("K must be at least 1")
        self.base, self.spec, self.seed, self.aggregation = base, spec, seed, aggregation
        self.stats = getattr(base, "stats", {})

    def _views(self, window: Window) -> list[list[int]]:
        n = len(window.doc_ids)
        return [fisher_yates(range(n), derive_seed(self.seed, "view", window.query_id, *window.doc_ids, j))
                for j in range(self.spec.k)]

    def _aggregate(self, rankings: list[list[str]]) -> list[str]:
        if self.aggregation == "borda" or (self.aggregation == "kemeny" and len(rankings[0]) > 20):
            start = debias.borda(rankings)
            return start if self.aggregation == "borda" else debias.local_search(start, rankings)
        if self.aggregation == "rrf":
            return debias.rrf_consensus(rankings)
        return debias.kemeny(rankings)

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        plans = [self._views(w) for w in windows]
        views = [Window(w.query_id, w.query, [w.doc_ids[i] for i in perm], [w.texts[i] for i in perm])
                 for w, plan in zip(windows, plans) for perm in plan]
        results = self.base.rank(views)
        out = []
        for wi, window in enumerate(windows):
            mine = results[wi * self.spec.k:(wi + 1) * self.spec.k]
            mine_views = views[wi * self.spec.k:(wi + 1) * self.spec.k]
            index = {d: i for i, d in enumerate(window.doc_ids)}
            if self.spec.method == "bsc" and all(r.scores is not None for r in mine):
                per_doc: dict[str, list[float]] = {d: [] for d in window.doc_ids}
                for view, res in zip(mine_views, mine):
                    for d, s in zip(view.doc_ids, res.scores):
                        per_doc[d].append(s)
                ranking = debias.bsc(per_doc)
                scores = [float(np.mean(per_doc[d])) for d in window.doc_ids]
            else:
                rankings = [[view.doc_ids[i] for i in res.order] for view, res in zip(mine_views, mine)]
                ranking = self._aggregate(rankings) if self.spec.method == "permsc" else debias.borda(rankings)
                scores = None
            cost = {key: sum(r.stats.get(key, 0) for r in mine) for key in ("calls", "prompt_tokens")}
            out.append(WindowResult(order=[index[d] for d in ranking], scores=scores, stats=cost))
        return out


class CapCalDebiased:
    """CapCal with a fixed α or the entropy-adaptive one (α=None)."""

    def __init__(self, base: Reranker, alpha: float | None = None, c: float = 5.0, alpha_max: float = 2.0,
                 placeholder: str = ""):
        self.base, self.placeholder = base, placeholder
        self.calibrate = partial(debias.capcal_scores, alpha=alpha, c=c, alpha_max=alpha_max)
        self.stats = getattr(base, "stats", {})

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        if hasattr(self.base, "calibration_inputs"):
            out = []
            for p_real, p_empty, cost in self.base.calibration_inputs(windows, self.placeholder):
                s = self.calibrate(p_real, p_empty)
                out.append(WindowResult(order=sorted(range(len(s)), key=lambda i: (-s[i], i)), scores=s, stats=cost))
            return out
        if hasattr(self.base, "rank_calibrated"):
            return self.base.rank_calibrated(windows, self.calibrate, self.placeholder)
        raise ValueError(f"{type(self.base).__name__} supports neither single-step nor sequential CapCal")


def wrap(base: Reranker, name: str, seed: int, options: dict | None = None) -> Reranker:
    """``base`` with the debiasing method ``name`` (none, capcal, permsc@K, bsc@K) applied."""
    spec, options = parse(name), options or {}
    if spec.method == "none":
        return base
    if spec.method == "capcal":
        return CapCalDebiased(base, options.get("alpha"), options.get("c", 5.0), options.get("alpha_max", 2.0),
                              options.get("placeholder", ""))
    return PermutationDebiased(base, spec, seed, options.get("aggregation", "kemeny"))
