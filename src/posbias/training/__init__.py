"""Fine-tuning rerankers with the HF ``Trainer``: First, DebiasFirst and its ablations (listwise),
OC-SFT and its baselines (pointwise); what each method is lives in :mod:`posbias.methods`.

One concept per module:

- :mod:`~posbias.training.spec`: :class:`TrainSpec`, the hyper-parameters (defaults in config/schema.yaml).
- :mod:`~posbias.training.families`: the family registry: what each family reads, its examples, collator and objective.
- :mod:`~posbias.training.listwise`: listwise examples, collator and the joint First objective.
- :mod:`~posbias.training.pointwise`: OC-SFT views, collator and objective of the Grades scorer.
- :mod:`~posbias.training.trainer`: the ``Trainer`` subclass, SIGTERM checkpointing, the loss curve.
- :mod:`~posbias.training.checkpoints`: which checkpoint a rerun may resume from.
- :mod:`~posbias.training.run`: :func:`train`, one training run in this process; :func:`first_queries`, a label budget.
- :mod:`~posbias.training.launcher`: :func:`launch_distributed` (torchrun) and the worker CLI.
"""

import importlib

# Imported on first use (PEP 562), so that reading the family registry (the train rule's inputs, at DAG
# time) does not import torch.
_EXPORTS = {"Preempted": "posbias.training.trainer", "TrainSpec": "posbias.training.spec",
            "launch_distributed": "posbias.training.launcher", "train": "posbias.training.run",
            "first_queries": "posbias.training.run"}

__all__ = ["Preempted", "TrainSpec", "first_queries", "launch_distributed", "train"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
