"""The hyper-parameters of one training run.

The values come from the validated config: ``training.<name>.hyper`` (every key with its one
default in config/schema.yaml), plus the run's method and seed, the reranking word budget and the
base model's prompt style. :meth:`TrainSpec.create` fills the schema's defaults for callers
outside the workflow (tests, benches).
"""

from __future__ import annotations

from dataclasses import dataclass

from posbias import methods
from posbias.errors import PosbiasError
from posbias.methods import TrainingMethod
from posbias.training import families
from posbias.training.families import TrainingFamily


@dataclass
class TrainSpec:
    """One run's settings; the field meanings are the ``training.*.hyper`` keys of config/schema.yaml."""

    method: str
    seed: int
    word_budget: int
    prompt: str
    learning_rate: float
    weight_decay: float
    adam_beta2: float
    warmup_ratio: float
    epochs: float
    max_steps: int
    batch_size: int
    grad_accum: int
    max_grad_norm: float
    bf16: bool
    neftune_alpha: float | None
    gradient_checkpointing: bool
    deepspeed: str | None
    save_steps: int
    save_total_limit: int
    logging_steps: int
    max_context: int
    rank_weight: float
    lm_weight: float
    lm_tokens: int | None
    lm_softmax: str
    ips_clip: float | None
    ips_floor: float | None
    ips_normalize: bool
    views: int
    consistency: float
    consistency_warmup: int
    consistency_form: str
    ema_decay: float
    resample_views: bool
    lora: dict | None = None  # hyper.lora; absent (the schema states no default) = full fine-tuning

    def __post_init__(self) -> None:
        from posbias.config import check_hyper

        methods.get(self.method)
        check_hyper(vars(self))

    @classmethod
    def create(cls, method: str, *, seed: int | None = None, word_budget: int | None = None,
               prompt: str | None = None, **hyper) -> TrainSpec:
        """A spec with the schema's defaults for everything not given (the root ``seed``,
        ``reranking.word_budget``, a causal LM's ``prompt`` and every ``hyper`` key)."""
        from posbias.config import (
            defaults,
            fill_defaults,
            model_defaults,
            schema,
            schema_node,
        )

        filled = fill_defaults(schema_node("training", "hyper"), dict(hyper))
        return cls(method=method, seed=schema()["properties"]["seed"]["default"] if seed is None else seed,
                   word_budget=defaults("reranking")["word_budget"] if word_budget is None else word_budget,
                   prompt=model_defaults("causal_lm")["prompt"] if prompt is None else prompt, **filled)

    @property
    def method_entry(self) -> TrainingMethod:
        """The registry entry of :attr:`method` (its family, loss terms and traits)."""
        return methods.get(self.method)

    @property
    def family(self) -> TrainingFamily:
        """The registry entry of the method's family: its inputs, batches and objective."""
        return families.get(self.method_entry.family)


def check_warmup(key: str, method: str, consistency: float, warmup: int, steps: int) -> None:
    """Refuse a λ warm-up longer than the run: λ would never reach ``consistency`` (the OC-SFT paper's
    "λ 前 500 步从 0 线性升到目标" on a run of fewer than 500 steps trains a weaker penalty than it names).
    ``key`` names the config key; ``steps`` is the run's optimiser steps (planned, or the trainer's)."""
    if methods.get(method).consistency and consistency > 0 and warmup > steps:
        raise PosbiasError(f"{key}: {warmup} steps of λ warm-up but the run has {steps} "
                           f"optimiser steps, so λ would end at {consistency * steps / warmup:.2g} instead of "
                           f"{consistency:g}; set consistency_warmup to at most {steps} (docs/fidelity.md, OC-SFT's "
                           "warm-up)")
