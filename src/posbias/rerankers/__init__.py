"""Rerankers behind one declared interface (:class:`~posbias.rerankers.base.Reranker`).

- :mod:`~posbias.rerankers.simulated`: no LM; relevance + positional prior + seeded noise (known answers).
- :mod:`~posbias.rerankers.first`: a causal LM read as FIRST does, one forward pass per window.
- :mod:`~posbias.rerankers.generation`: a causal LM that generates ``[B] > [A] > …`` (RankZephyr-style).
- :class:`posbias.scoring.GradesScorer`: a causal LM read as the batched pointwise "Grades:" scorer (OC-SFT), beside the readout it shares with training.
- :mod:`~posbias.debias.wrappers`: PermSC, BSC and CapCal around any of them (:mod:`posbias.debias`).

To add a reranker mode: subclass :class:`Reranker` in a module here (declaring its capabilities and
``from_config``), add its :class:`~posbias.rerankers.modes.RerankerMode` line to
:data:`~posbias.rerankers.modes.MODES`, and its name to config/schema.yaml's ``mode`` enum.
"""

from __future__ import annotations

from posbias.rerankers import modes
from posbias.rerankers.base import BuildContext, Reranker, Window, WindowResult, by_score

__all__ = ["BuildContext", "Reranker", "Window", "WindowResult", "build", "by_score"]


def build(spec: dict, path: str | None, grades: dict[str, dict[str, int]], seed: int, device: str,
          word_budget: int, loaded: tuple | None = None) -> Reranker:
    """The reranker a validated ``models:`` entry describes (``path`` resolved for causal LMs): its mode's
    class for its kind (:data:`posbias.rerankers.modes.MODES`), built by its ``from_config``.

    ``loaded``: the (tokenizer, model) of a causal LM already at hand; ``(tokenizer, None)`` builds a
    reranker that counts calls and prompt tokens without running a model (:mod:`posbias.plan`).
    """
    context = BuildContext(path, grades, seed, device, word_budget, loaded)
    return modes.implementation(spec).from_config(spec, context)
