"""Reranker modes (``models.<name>.mode``): what each mode is, and the class that implements it per model kind.

An entry carries the mode's behaviour, so no code tests a mode's name:

- ``family``: ``listwise`` (the model orders a window; the driver slides windows) or ``pointwise`` (a score
  per passage; the driver cuts contiguous windows and sorts by score). Config checks match training methods
  and debiasing methods to it (:mod:`posbias.methods`, :mod:`posbias.debias`).
- ``decodes``: a language model in this mode generates its answer token by token: its calls are decoding
  steps (priced per step by the compute plan), as many as the model writes.
- ``classes``: by model kind (``causal_lm``, ``simulated``), the :class:`~posbias.rerankers.base.Reranker`
  subclass as ``"module:Class"``, imported only when a job builds it (so reading a config imports no torch);
  :func:`posbias.rerankers.build` calls its ``from_config``. The class declares the rest of its capabilities
  (``pointwise`` and ``decodes`` as here, ``priors``, ``window``; :mod:`posbias.rerankers.base`).

This module imports nothing of posbias but :mod:`posbias.registry`, so the config layer reads it without the
implementations.
"""

from __future__ import annotations

from dataclasses import dataclass

from posbias import registry


@dataclass(frozen=True)
class RerankerMode:
    """One ``models.<name>.mode``: its scorer family, whether it decodes, a line naming it in errors, and its
    classes by model kind."""

    family: str
    decodes: bool
    description: str
    classes: dict[str, str]


_SIMULATED_LISTWISE = "posbias.rerankers.simulated:SimulatedReranker"

# By config name; config/schema.yaml's `mode` enum lists the same names (a test checks).
MODES: dict[str, RerankerMode] = {
    "first": RerankerMode("listwise", False, "FIRST single-token readout of the identifier logits",
                          {"causal_lm": "posbias.rerankers.first:FirstReranker", "simulated": _SIMULATED_LISTWISE}),
    "generation": RerankerMode("listwise", True, "greedy generation of [B] > [A] > … (RankZephyr-style)",
                               {"causal_lm": "posbias.rerankers.generation:GenerationReranker",
                                "simulated": _SIMULATED_LISTWISE}),
    "grades": RerankerMode("pointwise", False, "the batched pointwise \"Grades:\" scorer (OC-SFT)",
                           {"causal_lm": "posbias.scoring:GradesScorer",
                            "simulated": "posbias.rerankers.simulated:SimulatedGrader"}),
}


def get(name: str) -> RerankerMode:
    """The registered mode ``name``; ValueError naming the registered ones otherwise."""
    return registry.entry(MODES, name, "reranker mode")


def family(spec: dict) -> str:
    """The scorer family (``listwise`` or ``pointwise``) of a validated ``models:`` entry."""
    return get(spec["mode"]).family


def names(family_name: str) -> list[str]:
    """The modes of one family, in registry order."""
    return [name for name, mode in MODES.items() if mode.family == family_name]


def implementation(spec: dict) -> type:
    """The Reranker class of a validated ``models:`` entry (its mode and kind), imported now."""
    target = get(spec["mode"]).classes.get(spec["kind"])
    if target is None:
        raise ValueError(f"reranker mode {spec['mode']!r} has no {spec['kind']} implementation")
    return registry.load(target)
