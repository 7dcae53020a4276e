"""The HF ``Trainer`` subclass both families train with, SIGTERM checkpointing and the loss curve.

Preemption and time limits: SIGTERM (SLURM's preemption signal, and the time-limit warning asked
for with ``--signal=TERM@<seconds>``) makes the run finish its current optimiser step, write a
checkpoint and stop with :class:`Preempted` (a non-zero exit), so that the job's rerun
(``--retries``, ``--rerun-incomplete``) resumes from that checkpoint.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import polars as pl
import torch

from posbias import registry
from posbias.training.spec import check_warmup

log = logging.getLogger(__name__)


def trainer_class():
    from transformers import Trainer, TrainerCallback

    class RerankerTrainer(Trainer):
        """``Trainer`` whose loss is the objective of the method's family (:mod:`posbias.training.families`);
        logs the loss parts. A collator with an ``epoch`` is told each epoch (the pointwise views' seeds)."""

        def __init__(self, *args, id_tokens, spec, propensity, **kwargs):
            super().__init__(*args, **kwargs)
            # Our objectives are means over their micro-batch, so the Trainer must divide each by the
            # accumulation steps. It skips that division when the model "accepts loss kwargs" and the
            # batch carries labels (listwise batches do): it expects a loss already summed over the
            # accumulated items. Off, every family's step over b x k equals its step over b·k x 1
            # (micro-batches of equal size weigh equally; the LM term is a token mean per micro-batch).
            self.model_accepts_loss_kwargs = False
            self.id_tokens, self.spec, self.propensity = id_tokens, spec, propensity
            self.objective = registry.load(spec.family.objective)
            self._parts: dict[str, list[float]] = {}
            # prompt tokens read since the last log, and when that was: tokens_per_s in each logged step
            self._tokens, self._since = 0, time.perf_counter()
            if hasattr(self.data_collator, "epoch"):
                collator = self.data_collator

                class EpochToCollator(TrainerCallback):
                    def on_epoch_begin(self, args, state, control, **kwargs):
                        collator.epoch = int(state.epoch or 0)

                self.add_callback(EpochToCollator())

            class WarmupWithinRun(TrainerCallback):
                def on_train_begin(self, args, state, control, **kwargs):
                    check_warmup(f"the {spec.method} run's hyper.consistency_warmup", spec.method, spec.consistency,
                                 spec.consistency_warmup, state.max_steps)

            self.add_callback(WarmupWithinRun())

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss, parts, outputs = self.objective(model, inputs, self)
            if model.training and "attention_mask" in inputs:
                self._tokens += int(inputs["attention_mask"].sum())
            for key, value in parts.items():
                self._parts.setdefault(key, []).append(value)
            return (loss, outputs) if return_outputs else loss

        def log(self, logs, *args, **kwargs):
            for key, values in self._parts.items():
                logs[key] = float(np.max(values) if key.endswith("_max") else np.mean(values))
            self._parts = {}
            if "loss" in logs:  # a training step's log: the tokens read per second of wall time since the last
                now = time.perf_counter()
                logs["tokens_per_s"] = self._tokens / max(now - self._since, 1e-9)
                self._tokens, self._since = 0, now
            super().log(logs, *args, **kwargs)

    return RerankerTrainer


class Preempted(RuntimeError):
    """Training stopped on SIGTERM after writing a checkpoint; a rerun resumes from it."""


def preemption_callback():
    import signal

    from transformers import TrainerCallback

    class CheckpointOnSigterm(TrainerCallback):
        """On SIGTERM: finish the current step, save a checkpoint, stop. Ranks agree through an all-reduce,
        so every process of a torchrun job saves the same step."""

        def __init__(self):
            self.received = False
            self.stopped_at: int | None = None
            self.previous = signal.signal(signal.SIGTERM, self._on_sigterm)

        def _on_sigterm(self, signum, frame):
            log.warning("SIGTERM received: checkpointing after the current step")
            self.received = True

        def restore(self):
            signal.signal(signal.SIGTERM, self.previous)

        def on_step_end(self, args, state, control, **kwargs):
            flag = self.received
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                t = torch.tensor([int(flag)], device=args.device)
                torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
                flag = bool(t.item())
            if flag:
                control.should_save = True
                control.should_training_stop = True
                self.stopped_at = state.global_step
            return control

    return CheckpointOnSigterm()


LOSS_PARTS = ("rank_loss", "lm_loss", "supervised_loss", "consistency_loss", "learning_rate", "ips_clipped_share",
              "ips_weight_mean", "ips_weight_max", "grad_norm", "tokens_per_s")


def loss_curve(history: list[dict]) -> pl.DataFrame:
    """The logged steps of a ``Trainer`` history (schema LOSS_CURVE); parts a method lacks are NaN."""
    rows = [{"step": int(h["step"]), "loss": float(h["loss"]), **{k: float(h.get(k, math.nan)) for k in LOSS_PARTS}}
            for h in history if "loss" in h and "step" in h]
    return pl.DataFrame(rows, schema={"step": pl.Int64, "loss": pl.Float64, **{k: pl.Float64 for k in LOSS_PARTS}})
