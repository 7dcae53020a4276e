"""The EMA mean teacher of OC-SFT's ablation (the paper: "EMA mean-teacher 消融为何失败").

Mean Teacher (Tarvainen & Valpola, 2017) keeps an exponential moving average of the student's weights,
θ' ← α·θ' + (1 − α)·θ after every optimiser step, and pulls the student towards that teacher's
predictions. Here (``ocsft_ema``) the teacher scores the same N views of a window as the student, and the
order-consistency penalty's centre is the teacher's mean score of each document over the views instead
of the student's own (:func:`posbias.losses.ocsft_terms` with ``centre``).

The average covers the trainable parameters only (all of them in full fine-tuning, the adapters under
LoRA) and lives beside the student on its device; the teacher's forward swaps the averages in, scores
without gradients and swaps the student's weights back. It is a ``TrainerCallback``: updated at each
step's end, written into every checkpoint (``ema.pt``) and read back when a run resumes, so a resumed
run has the teacher an uninterrupted one had. DeepSpeed ZeRO-3, which shards the weights themselves, is not
supported (ZeRO-2 keeps a full copy of the weights on every rank).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import TrainerCallback

FILE = "ema.pt"


class EmaTeacher(TrainerCallback):
    """An exponential moving average of a model's trainable weights, with decay ``decay``."""

    def __init__(self, decay: float):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"ema_decay {decay} must be in [0, 1)")
        self.decay = decay
        self.shadow: dict[str, torch.Tensor] = {}

    @staticmethod
    def _trainable(model) -> dict[str, torch.nn.Parameter]:
        return {name: p for name, p in model.named_parameters() if p.requires_grad}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """The teacher starts as the student (or, resuming at step k, as the teacher saved with checkpoint k)."""
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}" / FILE
        if state.global_step and saved.is_file():
            self.shadow = {k: v.to(p.device) for (k, v), p in
                           zip(torch.load(saved, map_location="cpu").items(), self._trainable(model).values())}
        else:
            self.shadow = {name: p.detach().clone() for name, p in self._trainable(model).items()}

    @torch.no_grad()
    def on_step_end(self, args, state, control, model=None, **kwargs):
        for name, p in self._trainable(model).items():
            self.shadow[name].mul_(self.decay).add_(p.detach(), alpha=1.0 - self.decay)

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir() and state.is_world_process_zero:
            torch.save({k: v.cpu() for k, v in self.shadow.items()}, folder / FILE)

    @torch.no_grad()
    def scores(self, model, forward):
        """``forward(model)`` with the teacher's weights in place of the student's (no gradients)."""
        params = self._trainable(model)
        for name, p in params.items():
            p.data, self.shadow[name] = self.shadow[name], p.data
        try:
            return forward(model).detach()
        finally:
            for name, p in params.items():
                p.data, self.shadow[name] = self.shadow[name], p.data


def of(trainer) -> EmaTeacher:
    """The trainer's EMA teacher (added by the pointwise family's setup for a method with ``ema_teacher``)."""
    return next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, EmaTeacher))
