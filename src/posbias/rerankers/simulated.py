"""The simulated listwise reranker: the known-answer model of the project.

score(passage at input position p of a window of k) =
    relevance_weight · grade(passage) + strength · prior(p, k) + noise · ε,   ε ~ N(0, 1)

with ``prior`` one of ``none`` (0), ``linear`` (1 − p/(k−1): linear decay), ``primacy``
(exp(−p/2): a sharp preference for the first few slots) and ``u_shaped`` (((p − c)/c)², c = (k−1)/2:
"lost in the middle"). ε is a fixed perturbation of each (query, passage) pair, drawn from a
generator seeded by the config seed, the query id and the doc id: it breaks ties between equally
relevant passages without depending on the presentation order, so with no prior the model is
exactly order-invariant. Because every term is explicit, its transition behaviour
P(output rank | input position) can be computed from the simulator alone.
"""

from __future__ import annotations

import numpy as np

from posbias.permute import derive_seed
from posbias.rerankers import Window, WindowResult

PRIORS = ("none", "linear", "primacy", "u_shaped")


def prior(kind: str, k: int) -> np.ndarray:
    """The positional prior over input positions 0 … k−1 (higher = favoured)."""
    p = np.arange(k, dtype=float)
    if kind == "none" or k == 1:
        return np.zeros(k)
    if kind == "linear":
        return 1.0 - p / (k - 1)
    if kind == "primacy":
        return np.exp(-p / 2.0)
    if kind == "u_shaped":
        c = (k - 1) / 2.0
        return ((p - c) / c) ** 2
    raise ValueError(f"unknown positional prior {kind!r}; use one of {PRIORS}")


class SimulatedReranker:
    def __init__(self, grades: dict[str, dict[str, int]], prior: str = "none", strength: float = 0.0,
                 noise: float = 0.0, relevance_weight: float = 1.0, seed: int = 0):
        if prior not in PRIORS:
            raise ValueError(f"unknown positional prior {prior!r}; use one of {PRIORS}")
        self.grades, self.prior, self.strength = grades, prior, strength
        self.noise, self.relevance_weight, self.seed = noise, relevance_weight, seed

    def scores(self, window: Window) -> np.ndarray:
        k = len(window.doc_ids)
        qrels = self.grades.get(window.query_id, {})
        relevance = np.array([qrels.get(d, 0) for d in window.doc_ids], dtype=float)
        eps = np.array([np.random.default_rng(derive_seed(self.seed, window.query_id, d)).standard_normal()
                        for d in window.doc_ids])
        return self.relevance_weight * relevance + self.strength * prior(self.prior, k) + self.noise * eps

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        out = []
        for window in windows:
            s = self.scores(window)
            order = sorted(range(len(s)), key=lambda i: (-s[i], i))  # ties keep input order
            out.append(WindowResult(order=order, scores=s.tolist()))
        return out
