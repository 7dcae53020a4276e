"""Rerankers behind one declared interface (:class:`~posbias.rerankers.base.Reranker`).

- :mod:`~posbias.rerankers.simulated`: no LM; relevance + positional prior + seeded noise (known answers).
- :mod:`~posbias.rerankers.first`: a causal LM read as FIRST does, one forward pass per window.
- :mod:`~posbias.rerankers.generation`: a causal LM that generates ``[B] > [A] > …`` (RankZephyr-style).
- :mod:`~posbias.rerankers.grades`: a causal LM read as the batched pointwise "Grades:" scorer (OC-SFT).
- :mod:`~posbias.rerankers.debiased`: PermSC, BSC and CapCal around any of them (:mod:`posbias.debiasing`).

To add a reranker: subclass :class:`Reranker` in a module here and add its branch to :func:`build`
(and its ``models.<name>.mode`` value to config/schema.yaml).
"""

from __future__ import annotations

from posbias.rerankers.base import Reranker, Window, WindowResult, by_score

__all__ = ["Reranker", "Window", "WindowResult", "build", "by_score"]


def build(spec: dict, path: str | None, grades: dict[str, dict[str, int]], seed: int, device: str,
          word_budget: int, loaded: tuple | None = None) -> Reranker:
    """The reranker a validated ``models:`` entry describes (``path`` resolved for causal LMs).

    ``loaded``: the (tokenizer, model) of a causal LM already at hand; ``(tokenizer, None)`` builds a
    reranker that counts calls and prompt tokens without running a model (:mod:`posbias.plan`).
    """
    if spec["kind"] == "simulated":
        from posbias.rerankers.simulated import SimulatedGrader, SimulatedReranker

        common = {"prior": spec["prior"], "strength": spec["strength"], "noise": spec["noise"],
                  "relevance_weight": spec["relevance_weight"], "seed": seed}
        if spec["mode"] == "grades":
            return SimulatedGrader(grades, window=spec["grade_window"], order_noise=spec["order_noise"], **common)
        return SimulatedReranker(grades, bias_space=spec["bias_space"], **common)
    from posbias import config
    from posbias.rerankers.lm import LMSpec

    lm = LMSpec(path=path, dtype=spec["dtype"], max_context=spec["max_context"],
                attn_implementation=spec["attn_implementation"], trust_remote_code=spec["trust_remote_code"],
                word_budget=word_budget, batch_size=spec["batch_size"], device=device,
                prompt=spec["prompt"], identifiers=spec["identifiers"],
                engine=spec.get("engine", config.model_defaults("causal_lm")["engine"]),  # params omit the default
                vllm={**config.defaults("models", "vllm"), **spec.get("vllm", {})})
    if spec["mode"] == "grades":
        from posbias.rerankers.grades import GradesScorer

        return GradesScorer(lm, spec["grade_window"], loaded)
    if spec["mode"] == "first":
        from posbias.rerankers.first import FirstReranker

        return FirstReranker(lm, loaded)
    from posbias.rerankers.generation import GenerationReranker

    return GenerationReranker(lm, loaded)
