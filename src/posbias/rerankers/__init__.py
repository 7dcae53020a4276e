"""Listwise rerankers behind one interface: a batch of windows in, a best-first order per window out.

- :mod:`~posbias.rerankers.simulated`: no LM; relevance + positional prior + seeded noise (known answers).
- :mod:`~posbias.rerankers.first`: a causal LM read as FIRST does, one forward pass per window.
- :mod:`~posbias.rerankers.generation`: a causal LM that generates ``[B] > [A] > …`` (RankZephyr-style).
- :mod:`posbias.scoring`: a causal LM read as the batched pointwise "Grades:" scorer (OC-SFT).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Window:
    """One window of one query, in input order."""

    query_id: str
    query: str
    doc_ids: list[str]
    texts: list[str]


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


class Reranker(Protocol):
    def rank(self, windows: list[Window]) -> list[WindowResult]: ...


def build(spec: dict, path: str | None, grades: dict[str, dict[str, int]], seed: int, device: str,
          word_budget: int) -> Reranker:
    """The reranker a ``models:`` entry describes (``path`` resolved for causal LMs)."""
    if spec["kind"] == "simulated":
        from posbias.rerankers.simulated import SimulatedGrader, SimulatedReranker

        common = {"prior": spec["prior"], "strength": spec["strength"], "noise": spec["noise"],
                  "relevance_weight": spec["relevance_weight"], "seed": seed}
        if spec.get("mode") == "grades":
            return SimulatedGrader(grades, window=spec["grade_window"], order_noise=spec["order_noise"], **common)
        return SimulatedReranker(grades, bias_space=spec["bias_space"], **common)
    from posbias.rerankers.lm import LMSpec

    lm = LMSpec(path=path, dtype=spec["dtype"], max_context=spec["max_context"],
                attn_implementation=spec["attn_implementation"], trust_remote_code=spec["trust_remote_code"],
                word_budget=word_budget, batch_size=spec["batch_size"], device=device,
                prompt=spec["prompt"])
    if spec["mode"] == "grades":
        from posbias.scoring import GradesScorer

        return GradesScorer(lm, spec["grade_window"])
    if spec["mode"] == "first":
        from posbias.rerankers.first import FirstReranker

        return FirstReranker(lm)
    from posbias.rerankers.generation import GenerationReranker

    return GenerationReranker(lm)
