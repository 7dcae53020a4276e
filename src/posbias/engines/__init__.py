"""Inference engines: what runs a causal LM for the listwise rerankers (``models.<name>.engine``).

A listwise reranker (:mod:`posbias.rerankers.first`, :mod:`posbias.rerankers.generation`) builds its
prompts and reads its answers itself, on token ids from its own tokenizer; an engine only runs the model
on those ids. Two operations cover every listwise path (the FIRST readout with letter or numeric
identifiers, generation, sequential CapCal, CapCal's content-free priors, PermSC / BSC views and the
propensity reranking):

- :meth:`Engine.next_token`: the next-token value of given tokens after each row (raw logits, or
  log-probabilities over the whole vocabulary);
- :meth:`Engine.generate`: greedy continuations up to a stop token.

Engines are registered in :data:`ENGINES` by their config name; each entry opens itself from an
:class:`posbias.rerankers.lm.LMSpec` and its tokenizer. The batched pointwise Grades scorer reads grade
tokens at every slot of one prompt, which neither operation gives; it runs on transformers, and so does
OC-SFT's silver teacher, a Grades model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class Engine(ABC):
    """Runs one causal LM on token ids.

    ``schedules_batches``: the engine batches and schedules requests itself (vLLM's continuous batching),
    so :func:`posbias.rerank.rerank` hands it a whole round of windows at once instead of
    ``batch_size`` at a time.
    """

    schedules_batches: bool = False

    @classmethod
    @abstractmethod
    def open(cls, spec, tokenizer) -> Engine:
        """The engine for :class:`posbias.rerankers.lm.LMSpec` ``spec``, whose tokenizer is ``tokenizer``."""

    def start(self, normalise: bool) -> None:
        """Get ready to answer (load, start a process) where that is not done at :meth:`open`; ``normalise``:
        what the reranker's :meth:`next_token` calls will ask for. A job calls it while it loads its model,
        so start-up is not charged to its first order."""

    @abstractmethod
    def next_token(self, rows: list[list[int]], tokens: list[list[int]], normalise: bool) -> list[list[float]]:
        """For each row, the value of each of its ``tokens`` as the next token: the raw logit, or with
        ``normalise`` the log-probability (log-softmax over the whole vocabulary)."""

    @abstractmethod
    def generate(self, rows: list[list[int]], max_tokens: list[int],
                 stop: set[int]) -> tuple[list[list[int]], int]:
        """Greedy continuations of each row (at most ``max_tokens[i]`` tokens, up to and including the first
        token of ``stop``), and the decoding passes spent on them."""

    @abstractmethod
    def stop_ids(self) -> set[int]:
        """The ids that end generation: the model's generation config's EOS ids (Qwen has two), else the
        tokenizer's EOS."""


@dataclass(frozen=True)
class EngineEntry:
    """``target``: the engine class, as ``module:Class`` (imported when a job opens it, so that reading a
    config imports neither torch nor vLLM); ``modes``: the reranker modes it serves; ``why_not``: why the
    others stay on transformers."""

    target: str
    modes: tuple[str, ...]
    why_not: str = ""


# By config name. transformers loads the torch model when opened; vLLM starts its process at the first request.
ENGINES: dict[str, EngineEntry] = {
    "transformers": EngineEntry("posbias.engines.hf:TransformersEngine", ("first", "generation", "grades")),
    "vllm": EngineEntry("posbias.engines.vllm_engine:VllmEngine", ("first", "generation"), why_not=(
        "the Grades scorer reads the grade tokens' logits at every slot of one prompt, which vLLM's offline "
        "engine returns only as prompt logprobs over the whole vocabulary (prompt_logprob_token_ids needs the V2 "
        "model runner, which its CPU build does not have)")),
}


def open_engine(spec, tokenizer) -> Engine:
    """The engine ``spec.engine`` names, for the model at ``spec.path`` (its class's ``open``)."""
    from posbias import registry

    return registry.load(ENGINES[spec.engine].target).open(spec, tokenizer)


def eos_ids(generation_config, tokenizer) -> set[int]:
    """The generation config's EOS ids (one or a list), else the tokenizer's EOS."""
    eos = getattr(generation_config, "eos_token_id", None)
    eos = tokenizer.eos_token_id if eos is None else eos
    return set(eos) if isinstance(eos, (list, tuple)) else {eos}
