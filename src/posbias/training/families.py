"""Training families: what a family of training methods reads, how its batches are made and what it optimises.

A training method (:mod:`posbias.methods`) belongs to a family; the family's entry carries everything that
differs between families, so the train rule, the train script, :func:`posbias.training.train` and the
trainer test no family's name:

- ``inputs``: the train job's data files by name (the rule's inputs), from the config and the run;
- ``read``: ``"module:function"`` turning those files into (training instances, propensity) in the job;
- ``setup``: ``"module:function"`` giving the examples, collator, the token ids the objective reads and the
  propensity as the objective takes it (:class:`Setup`), from the tokenizer, the instances and the spec;
- ``objective``: ``"module:function"`` of (model, batch, trainer) returning (loss, its parts for the log,
  the model outputs or None);
- ``instances``: the Parquet schema of its training instances (:mod:`posbias.schemas`);
- ``label``: what the loss figure calls its training data;
- ``silver``: it trains on a teacher's silver labels (the ``silver_labels`` stage feeds it: the config checks
  its teacher, the plan counts the teacher's passes, the OC-SFT settings table lists its λ and views);
- ``augmented``: it trains on the augment stage's listwise sets (noaug / randaug / posaug: the augmentation
  report and the objective × augmentation ablations read its methods).

:func:`of` gives a training method's family, so the config, the plan, the rules and the tables read these
traits instead of a family's name.

The functions are named as strings and imported when a job runs them (:func:`posbias.registry.load`), so the rules import no torch.
A collator with an ``epoch`` attribute is told each epoch (its views may depend on it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posbias import methods, paths, registry
from posbias.config.experiments import silver_path


@dataclass(frozen=True)
class Setup:
    """What :func:`posbias.training.train` hands the trainer: the examples, their collator, the token ids the
    objective reads (identifier or grade tokens), the propensity as the objective takes it (or None) and
    the callbacks the trainer adds."""

    examples: list
    collator: object
    id_tokens: list[int]
    propensity: object = None
    callbacks: tuple = ()  # TrainerCallbacks the family's objective relies on (the EMA teacher)


@dataclass(frozen=True)
class TrainingFamily:
    """One family of training methods: see the module docstring."""

    description: str
    inputs: Callable[[dict, dict], dict[str, str]]
    read: str
    setup: str
    objective: str
    instances: str
    label: Callable[[dict, object], str]
    silver: bool = False
    augmented: bool = False


def _listwise_inputs(config: dict, run: dict) -> dict[str, str]:
    inputs = {"data": paths.train_data(run["data"], run["aug"])}
    if methods.get(run["method"]).needs_omega:
        inputs["omega"] = paths.propensity(config["propensity"]["model"], "omega")
    return inputs


def _pointwise_inputs(config: dict, run: dict) -> dict[str, str]:
    return {"data": silver_path(config, run), "queries": paths.data(run["data"], "queries"),
            "corpus": paths.data(run["data"], "corpus")}


# By name; posbias.methods.TRAINING_FAMILY_NAMES lists the same names (a test checks).
TRAINING_FAMILIES: dict[str, TrainingFamily] = {
    "listwise": TrainingFamily(
        "First's rank and LM terms on listwise instances (First, DebiasFirst, the ablations)", _listwise_inputs,
        "posbias.training.listwise:read_inputs", "posbias.training.listwise:setup",
        "posbias.training.listwise:trainer_objective", "listwise", lambda run, files: run["aug"], augmented=True),
    "pointwise": TrainingFamily(
        "the Grades scorer on silver-labelled windows and their views (OC-SFT and its baselines)", _pointwise_inputs,
        "posbias.training.pointwise:read_inputs", "posbias.training.pointwise:setup",
        "posbias.training.pointwise:trainer_objective", "pointwise",
        lambda run, files: "silver " + Path(files["data"]).parent.name, silver=True),
}


def get(name: str) -> TrainingFamily:
    """The registered family ``name``; ValueError naming the registered ones otherwise."""
    return registry.entry(TRAINING_FAMILIES, name, "training family")


def of(method: str) -> TrainingFamily:
    """The family of training method ``method`` (a name of :data:`posbias.methods.TRAINING_METHODS`)."""
    return get(methods.get(method).family)
