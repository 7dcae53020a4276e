"""Inference-time debiasing methods: the one registry behind the ``debias`` wildcard.

A ``debias`` value is a method name, with ``@K`` for the methods that take a number of views
(``none``, ``capcal``, ``permsc@K``, ``bsc@K``). The wildcard constraint, the config checks, the
table labels and the reranking job all read :data:`METHODS`; nothing else lists these names.

To add a method: write its wrapper (a :class:`posbias.rerankers.Reranker` around the base
reranker, e.g. in :mod:`posbias.rerankers.debiased`) and register a :class:`DebiasMethod` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class DebiasMethod:
    """One inference-time debiasing method.

    ``build(base, k, seed, options)`` wraps a reranker (``k`` is None for methods without ``@K``);
    ``options`` are the config's ``reranking.permsc_aggregation`` and ``reranking.capcal`` keys.
    ``views_are_k``: the method reranks K presentations of each window (K model calls per window).
    """

    name: str
    takes_k: bool
    label: str
    build: Callable | None  # None: the base reranker itself
    views_are_k: bool = False


def _permutation(method: str) -> Callable:
    def build(base, k, seed, options):
        from posbias.rerankers.debiased import PermutationDebiased

        return PermutationDebiased(base, method, k, seed, options["aggregation"])

    return build


def _capcal(base, k, seed, options):
    from posbias.rerankers.debiased import CapCalDebiased

    return CapCalDebiased(base, options["alpha"], options["c"], options["alpha_max"], options["placeholder"])


METHODS: dict[str, DebiasMethod] = {m.name: m for m in (
    DebiasMethod("none", False, "no debiasing", None),
    DebiasMethod("capcal", False, "CapCal (content-agnostic calibration)", _capcal),
    DebiasMethod("permsc", True, "PermSC@{k} (aggregate K shuffled windows)", _permutation("permsc"),
                 views_are_k=True),
    DebiasMethod("bsc", True, "BSC@{k} (average scores over K shuffles)", _permutation("bsc"), views_are_k=True),
)}

PATTERN = "|".join(f"{n}@[1-9]\\d*" if m.takes_k else n for n, m in METHODS.items())
GRAMMAR = ", ".join(f"{n}@K" if m.takes_k else n for n, m in METHODS.items())


@dataclass(frozen=True)
class DebiasSpec:
    """A parsed ``debias`` value."""

    method: str
    k: int | None = None

    def __str__(self) -> str:
        return self.method if self.k is None else f"{self.method}@{self.k}"

    @property
    def label(self) -> str:
        return METHODS[self.method].label.format(k=self.k)


def parse(name: str) -> DebiasSpec:
    """The :class:`DebiasSpec` of a ``debias`` value; ValueError naming the grammar otherwise."""
    method, at, k = name.partition("@")
    entry = METHODS.get(method)
    if entry is None or entry.takes_k != bool(at) or (at and not (k.isascii() and k.isdigit() and int(k) >= 1)):
        raise ValueError(f"debias {name!r}: expected one of {GRAMMAR} (K ≥ 1)")
    return DebiasSpec(method, int(k) if at else None)


def options(reranking: dict) -> dict:
    """The wrappers' settings from a validated ``reranking`` config section."""
    return {"aggregation": reranking["permsc_aggregation"], **reranking["capcal"]}


def wrap(base, name: str, seed: int, settings: dict):
    """``base`` with the debiasing method ``name`` applied (``base`` itself for ``none``);
    ``settings`` from :func:`options` (outside the workflow: ``options(config.defaults("reranking"))``)."""
    spec = parse(name)
    build = METHODS[spec.method].build
    return base if build is None else build(base, spec.k, seed, settings)
