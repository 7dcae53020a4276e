"""Fine-tuning rerankers with the HF ``Trainer``: First, DebiasFirst and its ablations (listwise),
OC-SFT and its baselines (pointwise); what each method is lives in :mod:`posbias.methods`.

One concept per module:

- :mod:`~posbias.training.spec`: :class:`TrainSpec`, the hyper-parameters (defaults in config/schema.yaml).
- :mod:`~posbias.training.listwise`: listwise examples, collator and the joint First objective.
- :mod:`~posbias.training.pointwise`: OC-SFT views, collator and objective of the Grades scorer.
- :mod:`~posbias.training.trainer`: the ``Trainer`` subclass, SIGTERM checkpointing, the loss curve.
- :mod:`~posbias.training.checkpoints`: which checkpoint a rerun may resume from.
- :mod:`~posbias.training.run`: :func:`train`, one training run in this process.
- :mod:`~posbias.training.launcher`: :func:`launch_distributed` (torchrun) and the worker CLI.
"""

from posbias.training.launcher import launch_distributed
from posbias.training.run import train
from posbias.training.spec import TrainSpec
from posbias.training.trainer import Preempted

__all__ = ["Preempted", "TrainSpec", "launch_distributed", "train"]
