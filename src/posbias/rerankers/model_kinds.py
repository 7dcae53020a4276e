"""Model kinds (``models.<name>.kind``; ``readers.<name>.kind`` uses two of the same names): what an entry of each
kind is, so that no code tests a kind's name.

- ``weights``: the entry runs a network (loaded from a ``path``, built, converted or trained), so its jobs need
  its folder first and ask a CUDA node for a GPU; a simulator of known position bias has none.
- ``prompted``: a language model read through a tokenizer and a prompt: its prompts cost tokens and are cut to
  the word budget, it runs on an engine, can be fine-tuned and converted from a GGUF file.
- ``reranks``: it can rerank (a reranking experiment's or the propensity estimate's model); the encoders
  (dense, SPLADE) serve the first stage.

``config/schema.yaml``'s ``kind`` enum lists the same names (a test checks). Like :mod:`posbias.rerankers.modes`,
this module imports nothing of posbias but :mod:`posbias.registry`, so the config layer reads it without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from posbias import registry


@dataclass(frozen=True)
class ModelKind:
    """One ``kind`` of a models (or readers) entry: what it has and does, and a line naming it."""

    weights: bool
    prompted: bool
    reranks: bool
    description: str


MODEL_KINDS: dict[str, ModelKind] = {
    "encoder": ModelKind(True, False, False, "a dense bi-encoder (first stage)"),
    "masked_lm": ModelKind(True, False, False, "a masked LM read as SPLADE (first stage)"),
    "causal_lm": ModelKind(True, True, True, "a causal language model: transformers, or vLLM for the listwise modes"),
    "simulated": ModelKind(False, False, True, "a simulator of known position bias: no weights, no tokens"),
}


def get(name: str) -> ModelKind:
    """The registered kind ``name``; ValueError naming the registered ones otherwise."""
    return registry.entry(MODEL_KINDS, name, "model kind")


def of(spec: dict) -> ModelKind:
    """The kind of a validated models (or readers) entry."""
    return get(spec["kind"])


def named(trait: str) -> str:
    """The kinds that have ``trait`` (a :class:`ModelKind` field), for messages: ``causal_lm or simulated``."""
    return " or ".join(name for name, kind in MODEL_KINDS.items() if getattr(kind, trait))
