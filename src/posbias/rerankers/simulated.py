"""The simulated listwise reranker: the known-answer model of the project.

With ``bias_space="score"`` (default) the positional prior is additive in score (logit) space:

    score(passage at input position p of a window of k) =
        relevance_weight · grade(passage) + strength · prior(p, k) + noise · ε,   ε ~ N(0, 1)

and its answer distribution is P(d | x) = softmax(score). With ``bias_space="probability"`` the
prior is additive in probability space, a mixture in which the model answers by position alone
with probability λ = ``strength`` (0 … 1):

    P(d | x) = (1 − λ) · softmax(relevance_weight · grade + noise · ε) + λ · prior(p, k) / Σ prior,

and the score is that probability. This is the bias model CapCal assumes, so CapCal with α = 1
removes it exactly: a known answer for the calibration code.

with ``prior`` one of ``none`` (0), ``linear`` (1 − p/(k−1): linear decay), ``primacy``
(exp(−p/2): a sharp preference for the first few slots) and ``u_shaped`` (((p − c)/c)², c = (k−1)/2:
"lost in the middle"). ε is a fixed perturbation of each (query, passage) pair, drawn from a
generator seeded by the config seed, the query id and the doc id: it breaks ties between equally
relevant passages without depending on the presentation order, so with no prior the model is
exactly order-invariant. Because every term is explicit, its transition behaviour
P(output rank | input position) can be computed from the simulator alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from posbias import config
from posbias.permute import derive_seed
from posbias.rerankers.base import BuildContext, Reranker, Window, WindowResult, by_score

def _centred_square(p: np.ndarray, k: int) -> np.ndarray:
    c = (k - 1) / 2.0
    return ((p - c) / c) ** 2


# The positional priors over input positions p = 0 … k−1 of a window of k > 1 (higher = favoured), by name;
# config/schema.yaml's `prior` enum lists the same names (a test checks)
PRIORS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "none": lambda p, k: np.zeros(k),
    "linear": lambda p, k: 1.0 - p / (k - 1),
    "primacy": lambda p, k: np.exp(-p / 2.0),
    "u_shaped": _centred_square,
}


def prior(kind: str, k: int) -> np.ndarray:
    """The positional prior ``kind`` (:data:`PRIORS`) over input positions 0 … k−1 (higher = favoured); flat
    for a window of one."""
    if kind not in PRIORS:
        raise ValueError(f"unknown positional prior {kind!r}; use one of {', '.join(PRIORS)}")
    return np.zeros(k) if k == 1 else PRIORS[kind](np.arange(k, dtype=float), k)


_DEFAULTS = config.model_defaults("simulated")


def _shared(spec: dict, context: BuildContext) -> dict:
    """The settings both simulators read from a simulated ``models:`` entry."""
    return {"prior": spec["prior"], "strength": spec["strength"], "noise": spec["noise"],
            "relevance_weight": spec["relevance_weight"], "seed": context.seed}


class SimulatedReranker(Reranker):
    """The listwise simulator; argument defaults are a simulated ``models:`` entry's (config/schema.yaml)."""

    priors = "per_window"

    def __init__(self, grades: dict[str, dict[str, int]], prior: str = _DEFAULTS["prior"],
                 strength: float = _DEFAULTS["strength"], noise: float = _DEFAULTS["noise"],
                 relevance_weight: float = _DEFAULTS["relevance_weight"], seed: int = 0,
                 bias_space: str = _DEFAULTS["bias_space"]):
        if prior not in PRIORS:
            raise ValueError(f"unknown positional prior {prior!r}; use one of {', '.join(PRIORS)}")
        if bias_space not in ("score", "probability"):
            raise ValueError(f"bias_space must be 'score' or 'probability', not {bias_space!r}")
        if bias_space == "probability" and not 0.0 <= strength <= 1.0:
            raise ValueError("with bias_space='probability' the strength is a mixture weight in [0, 1]")
        super().__init__()
        self.grades, self.prior, self.strength = grades, prior, strength
        self.noise, self.relevance_weight, self.seed, self.bias_space = noise, relevance_weight, seed, bias_space
        self._eps: dict[tuple[str, str], float] = {}  # ε per (query, passage): fixed, so drawn once per scorer

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> SimulatedReranker:
        return cls(context.grades, bias_space=spec["bias_space"], **_shared(spec, context))

    def _content(self, window: Window) -> np.ndarray:
        qrels = self.grades.get(window.query_id, {})
        relevance = np.array([qrels.get(d, 0) for d in window.doc_ids], dtype=float)
        eps = np.array([self._epsilon(window.query_id, d) for d in window.doc_ids])
        return self.relevance_weight * relevance + self.noise * eps

    def _epsilon(self, query_id: str, doc_id: str) -> float:
        """ε of one (query, passage) pair, memoised: a generator per draw costs more than the rest of a score,
        and a silver-label job scores each pair in 11 presentations."""
        key = (query_id, doc_id)
        if key not in self._eps:
            self._eps[key] = float(np.random.default_rng(derive_seed(self.seed, query_id, doc_id)).standard_normal())
        return self._eps[key]

    def _prior_distribution(self, k: int) -> np.ndarray:
        pi = prior(self.prior, k)
        return np.full(k, 1.0 / k) if pi.sum() == 0 else pi / pi.sum()

    def scores(self, window: Window) -> np.ndarray:
        k = len(window.doc_ids)
        if self.bias_space == "probability":
            return (1 - self.strength) * _softmax(self._content(window)) + self.strength * self._prior_distribution(k)
        return self._content(window) + self.strength * prior(self.prior, k)

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        out = []
        for window in windows:
            s = self.scores(window)
            out.append(WindowResult(order=by_score(s), scores=s.tolist(), stats={"calls": 1, "prompt_tokens": 0}))
        return out

    def content_free_inputs(self, windows: list[Window],
                            placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """(P(d | x), P(d | x_empty)): softmax of the scores, and of the prior alone (a placeholder has no
        relevance and no identity, so only the positional term remains)."""
        out = []
        for window in windows:
            k = len(window.doc_ids)
            if self.bias_space == "probability":
                real = self.scores(window)
                empty = (1 - self.strength) / k + self.strength * self._prior_distribution(k)
            else:
                real = _softmax(self.scores(window))
                empty = _softmax(self.strength * prior(self.prior, k))
            out.append((real.tolist(), empty.tolist(), {"calls": 1, "prompt_tokens": 0}))
        return out


class SimulatedGrader(SimulatedReranker):
    """The simulated pointwise "Grades:" scorer (OC-SFT's known-answer model).

    score(d at slot p of a window of B) = σ(relevance_weight · (grade(d) − 1.5) + strength · prior(p, B)
    + noise · ε(q, d) + order_noise · η(q, d, window)), with ε the fixed per-(query, doc) perturbation
    of :class:`SimulatedReranker` and η a standard normal seeded by the query, the document and the
    whole window in its presentation order: order-dependent noise. With ``strength = 0`` and
    ``order_noise = 0`` it is exactly order-invariant.
    """

    pointwise = True
    priors = "per_slot"

    def __init__(self, grades: dict[str, dict[str, int]], window: int = _DEFAULTS["grade_window"],
                 order_noise: float = _DEFAULTS["order_noise"], **kwargs):
        super().__init__(grades, **kwargs)
        self.window, self.order_noise = window, order_noise
        self._priced: set[tuple[str, int]] = set()  # (query, window size) whose content-free call is counted

    def reset_stats(self) -> None:
        """Zero the counters and forget which content-free prompts were counted, so each order pays for its own."""
        super().reset_stats()
        self._priced.clear()

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> SimulatedGrader:
        return cls(context.grades, window=spec["grade_window"], order_noise=spec["order_noise"],
                   **_shared(spec, context))

    def scores(self, window: Window) -> np.ndarray:
        content = self._content(window) - self.relevance_weight * 1.5
        presentation = "\x1f".join(window.doc_ids)
        eta = np.array([np.random.default_rng(derive_seed(self.seed, window.query_id, d, presentation)).standard_normal()
                        for d in window.doc_ids]) if self.order_noise else 0.0
        logit = content + self.strength * prior(self.prior, len(window.doc_ids)) + self.order_noise * eta
        return 1.0 / (1.0 + np.exp(-logit))

    def content_free_inputs(self, windows: list[Window],
                            placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """(slot scores, content-free slot scores, cost): a placeholder has no relevance, no identity and no
        order-dependent noise, so its score is σ(−1.5 · relevance_weight + strength · prior(slot)). The
        content-free prompt is one more call per (query, window size), charged to its first window."""
        out = []
        for window in windows:
            k = len(window.doc_ids)
            empty = 1.0 / (1.0 + np.exp(self.relevance_weight * 1.5 - self.strength * prior(self.prior, k)))
            first = (window.query_id, k) not in self._priced
            self._priced.add((window.query_id, k))
            out.append((self.scores(window).tolist(), empty.tolist(), {"calls": 1 + first, "prompt_tokens": 0}))
        return out


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()
