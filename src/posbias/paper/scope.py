"""Which of the papers' tables and figures a config gives rows to, read from the config alone at DAG time, so
that a run writes only those (a config without position orders writes no position-bias table, rather than
one whose body says "none").

Each predicate takes the prepared config (seeds expanded); :class:`~posbias.paper.PaperTable` and
:class:`~posbias.paper.PaperFigure` entries name theirs as ``when``.
"""

from __future__ import annotations

from collections.abc import Callable

from posbias import debias, orders
from posbias.config import orders_of, variant_of
from posbias.training import families

Predicate = Callable[[dict], bool]


def _experiments(config: dict) -> list[dict]:
    return config["reranking"]["experiments"]


def always(config: dict) -> bool:
    """Every run that reranks anything fills it."""
    return bool(_experiments(config))


def with_order(kind: str) -> Predicate:
    """Some experiment reranks an order of ``kind`` (``position``, ``shuffled``)."""

    def when(config: dict) -> bool:
        return any(orders.is_kind(order, kind) for e in _experiments(config) for order in orders_of(config, e))

    return when


def original_and_shuffled(config: dict) -> bool:
    """Some experiment reranks the original order and a shuffle of it."""
    return any(orders.ORIGINAL in listed and any(orders.is_kind(o, "shuffled") for o in listed)
               for listed in (orders_of(config, e) for e in _experiments(config)))


def with_debias(method: str) -> Predicate:
    """Some experiment applies a debiasing method of family ``method`` (``capcal``: every CapCal variant)."""

    def when(config: dict) -> bool:
        return any(debias.parse(name).method == method for e in _experiments(config)
                   for name in (*e.get("debias", ()), *e.get("position_debias", ())))

    return when


def listwise_trained(config: dict) -> bool:
    """Some experiment reranks a model trained on the augment stage's listwise sets (the ablation cells)."""
    training = config.get("training") or {}
    return any(e["model"] in training and families.of(training[e["model"]]["method"]).augmented
               for e in _experiments(config))


def reference_and_baseline(config: dict) -> bool:
    """The reference model (``evaluation.reference``, or a seed of it) is reranked where another model is too."""
    training, reference = config.get("training") or {}, config["evaluation"].get("reference")
    experiments = _experiments(config)
    where = {(e["dataset"], e["retriever"]) for e in experiments if variant_of(training, e["model"]) == reference}
    return any((e["dataset"], e["retriever"]) in where and variant_of(training, e["model"]) != reference
               for e in experiments)
