"""The registry of inference-time debiasing methods, the one behind the ``debias`` wildcard.

A ``debias`` value is a method name, with ``@K`` for the methods that take a number of views
(``none``, ``capcal``, ``permsc@K``, ``permsc-window@K``, ``bsc@K``, and the prompt-side alternatives
``roundrobin@R`` (slot rotation), ``rename@K`` and ``roundrobin-windows``) and an optional ``@NAME`` for
those with named variants (``capcal@NAME``: the content-free placeholder, its length and α of
``reranking.capcal.variants.NAME``, to sweep them; ``skeleton@NAME``: the answer skeleton the probe reads
with, :data:`posbias.prompts.SKELETONS`). The wildcard constraints,
the config checks, the table labels and the reranking jobs all read :data:`DEBIAS_METHODS`; nothing else
lists these names.

Two levels:

- ``window``: a wrapper around the base reranker changes how each window is ranked (CapCal, BSC,
  PermSC per window); the ``rerank`` job runs it on every order of the experiment.
- ``list``: the method combines whole reranked lists the experiment already has (PermSC as the
  papers define it: the K reranked lists of ``shuffled-0`` … ``shuffled-(K−1)`` aggregated into one
  central ranking, :mod:`posbias.debias.list_level`). Its entry names the orders it reads (``lists``) and its
  combine step (``combine``); the ``combine_lists`` job calls :func:`combine`, makes no model call and
  writes the result as the ``original`` order, its cost the reranking passes it combines.

To add a method: write its wrapper (a :class:`posbias.rerankers.Reranker` around the base
reranker, in :mod:`posbias.debias.wrappers`) or, for a list-level method, its combine
function, and register a :class:`DebiasMethod` here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from posbias import orders, registry

WRAPPERS = "posbias.debias.wrappers"  # the window-level wrappers, imported when a job wraps a reranker


@dataclass(frozen=True)
class DebiasMethod:
    """One inference-time debiasing method.

    ``build(base, spec, seed, settings)`` wraps a reranker (``spec`` the parsed :class:`DebiasSpec`);
    ``settings(reranking, spec)`` picks the keys of the ``reranking`` config section the method reads
    (so a job's params hold only those, and an edit elsewhere reruns none of its jobs).
    ``takes_k``: the value is ``name@K``; ``takes_variant``: ``name`` or ``name@VARIANT``.
    ``level``: ``window`` (a wrapper; None: the base reranker itself) or ``list`` (combines reranked
    lists the experiment has; no wrapper): ``lists(spec)`` the orders it reads (each of debias
    ``none``), ``combine`` its step as ``"module:function"`` (imported when a job runs it), called as
    ``function(runs, **settings)`` with those orders' runs and returning one run. ``families``: the scorers it applies to,
    ``listwise`` rerankers and/or ``pointwise`` Grades scorers (whose BSC@K the stability stage
    computes from their shuffled orders, so the permutation methods are listwise only here).
    ``check(family, settings)``: what the method cannot do on a scorer of ``family`` with its ``settings``
    (those ``settings`` picks), one line, or None: the config is refused with it before any job.
    ``claim``: the id of the papers' directional claim that tests the method against the plain reading
    (:mod:`posbias.reproduction.claims`), if one does.
    ``probe``: the presentation channel (``markers``, …) whose sensitivity the method's K = 1 view measures:
    its stability rows' ``plain_shift`` (the pairs that flip against the plain scorer's ranking of the same
    presentation) is that channel's τ-PSI (:mod:`posbias.paper.channels`).
    """

    name: str
    takes_k: bool
    label: str
    build: Callable | None
    level: str = "window"
    takes_variant: bool = False
    settings: Callable[[dict, DebiasSpec], dict] = lambda reranking, spec: {}
    families: frozenset[str] = frozenset({"listwise"})
    probe: str | None = None
    lists: Callable[[DebiasSpec], list[str]] | None = None
    combine: str | None = None
    check: Callable[[str, dict], str | None] = lambda family, settings: None
    claim: str | None = None


def _shuffled_lists(spec: DebiasSpec) -> list[str]:
    """``shuffled-0`` … ``shuffled-(K−1)``."""
    return [orders.shuffled(s) for s in range(spec.k)]


def _views(wrapper: str, average_scores: bool | None) -> Callable:
    """Build ``wrapper`` (a view-combining class of :mod:`posbias.debias.wrappers`, ``"module:Class"``),
    which takes K views of each window and combines them: scores averaged (``average_scores``; None: when
    the base is pointwise) or rankings aggregated."""
    def build(base, spec, seed, settings):
        average = base.pointwise if average_scores is None else average_scores
        return registry.load(wrapper)(base, spec.k, seed, settings["aggregation"], average)

    return build


def _aggregation(reranking: dict, spec) -> dict:
    return {"aggregation": reranking["permsc_aggregation"]}


def _capcal_settings(reranking: dict, spec) -> dict:
    """CapCal's settings, with those of variant ``spec.variant`` (``reranking.capcal.variants``) over them."""
    capcal = reranking["capcal"]
    if spec.variant is not None and spec.variant not in capcal["variants"]:
        raise ValueError(f"{spec} names no variant in reranking.capcal.variants "
                         f"({', '.join(capcal['variants']) or 'none defined'}); define it there")
    chosen = {k: capcal[k] for k in ("alpha", "c", "alpha_max", "placeholder", "placeholder_length")}
    return chosen | (capcal["variants"][spec.variant] if spec.variant else {})


def _capcal_check(family: str, settings: dict) -> str | None:
    """A pointwise scorer gives no answer distribution over identifiers for the entropy-adaptive α."""
    if family == "pointwise" and settings["alpha"] is None:
        return ("needs a fixed alpha (the entropy-adaptive alpha reads an answer distribution "
                "over identifiers, which a Grades scorer does not give); set the variant's alpha (e.g. "
                "reranking.capcal.variants.exact: {alpha: 1.0}, capcal@exact)")
    return None


def placeholder(settings: dict) -> str:
    """The text that replaces every passage in CapCal's content-free prompt: the placeholder repeated
    ``placeholder_length`` times."""
    return " ".join([settings["placeholder"]] * settings["placeholder_length"])


def _skeleton_settings(reranking: dict, spec) -> dict:
    """The skeleton probe's one setting: the answer skeleton it reads with (``skeleton@NAME``)."""
    from posbias.prompts import DEFAULT_SKELETON, SKELETONS

    others = [n for n in SKELETONS if n != DEFAULT_SKELETON]
    if spec.variant not in others:
        raise ValueError(f"{spec}: name the answer skeleton to probe, one of "
                         f"{', '.join(f'skeleton@{n}' for n in others)}")
    return {"skeleton": spec.variant}


def _skeleton(base, spec, seed, settings):
    return registry.load(f"{WRAPPERS}:SkeletonSwapped")(base, settings["skeleton"])


def _round_robin_windows(base, spec, seed, settings):
    return registry.load(f"{WRAPPERS}:RoundRobinWindowing")(base)


def _capcal(base, spec, seed, settings):
    return registry.load(f"{WRAPPERS}:CapCalDebiased")(base, settings["alpha"], settings["c"], settings["alpha_max"],
                                                         placeholder(settings))


DEBIAS_METHODS: dict[str, DebiasMethod] = {m.name: m for m in (
    DebiasMethod("none", False, "no debiasing", None, families=frozenset({"listwise", "pointwise"})),
    DebiasMethod("capcal", False, "CapCal (content-agnostic calibration){variant}", _capcal, takes_variant=True,
                 settings=_capcal_settings, families=frozenset({"listwise", "pointwise"}), check=_capcal_check,
                 claim="capcal-lifts-quality"),
    DebiasMethod("permsc", True, "PermSC@{k} (the {k} reranked shuffled lists aggregated)", None, level="list",
                 settings=_aggregation, lists=_shuffled_lists, combine="posbias.debias.list_level:aggregate_runs",
                 claim="permsc-beats-one-list"),
    DebiasMethod("permsc-window", True, "PermSC-window@{k} ({k} shuffles of each window aggregated)",
                 _views(f"{WRAPPERS}:PermutationDebiased", average_scores=False), settings=_aggregation),
    DebiasMethod("bsc", True, "BSC@{k} (scores averaged over {k} shuffles)",
                 _views(f"{WRAPPERS}:PermutationDebiased", average_scores=True), settings=_aggregation),
    DebiasMethod("roundrobin", True, "slot rotation ×{k} ({k} rotations of each window combined)",
                 _views(f"{WRAPPERS}:RoundRobin", average_scores=None), settings=_aggregation,
                 families=frozenset({"listwise", "pointwise"})),
    DebiasMethod("rename", True, "rename@{k} ({k} relabellings of each window's markers, scores averaged)",
                 _views(f"{WRAPPERS}:MarkerRenamed", average_scores=True), settings=_aggregation,
                 families=frozenset({"pointwise"}), probe="markers"),
    DebiasMethod("skeleton", False, "skeleton probe{variant} (each window read with another answer skeleton)",
                 _skeleton, takes_variant=True, settings=_skeleton_settings, families=frozenset({"pointwise"}),
                 probe="skeleton"),
    DebiasMethod("roundrobin-windows", False, "round-robin windowing (passage i of the list in window i mod W)",
                 _round_robin_windows, families=frozenset({"pointwise"})),
)}


# The two ways of combining K presentations, by method name: the stability stage forms its K > 1 rows
# with PermSC@K (a listwise model's reranked shuffles aggregated) or BSC@K (a pointwise scorer's mean).
AGGREGATE_LISTS = "permsc"
AVERAGE_SCORES = "bsc"


def shuffle_combine(family: str) -> str:
    """How a plain scorer's K shuffled presentations combine into one: BSC's mean scores (a pointwise
    scorer) or PermSC's rank aggregation (a listwise model's reranked lists)."""
    return AVERAGE_SCORES if family == "pointwise" else AGGREGATE_LISTS

VARIANT = "[a-z][a-z0-9_-]*"  # a variant name starts with a letter, so it never reads as K


def pattern(level: str | None = None) -> str:
    """The regular expression of the ``debias`` values of one level (None: all)."""
    return "|".join(f"{n}@[1-9]\\d*" if m.takes_k else f"{n}(?:@{VARIANT})?" if m.takes_variant else n
                    for n, m in DEBIAS_METHODS.items() if level is None or m.level == level)


PATTERN = pattern()
GRAMMAR = ", ".join(f"{n}@K" if m.takes_k else f"{n}[@VARIANT]" if m.takes_variant else n
                    for n, m in DEBIAS_METHODS.items())


@dataclass(frozen=True)
class DebiasSpec:
    """A parsed ``debias`` value."""

    method: str
    k: int | None = None
    variant: str | None = None

    def __str__(self) -> str:
        arg = self.k if self.k is not None else self.variant
        return self.method if arg is None else f"{self.method}@{arg}"

    @property
    def label(self) -> str:
        return DEBIAS_METHODS[self.method].label.format(k=self.k, variant=f", variant {self.variant}" if self.variant else "")

    @property
    def level(self) -> str:
        return DEBIAS_METHODS[self.method].level


def parse(name: str) -> DebiasSpec:
    """The :class:`DebiasSpec` of a ``debias`` value; ValueError naming the grammar otherwise."""
    method, at, arg = name.partition("@")
    entry = DEBIAS_METHODS.get(method)
    if entry is not None and entry.takes_variant and (not at or re.fullmatch(VARIANT, arg)):
        return DebiasSpec(method, variant=arg or None)
    if entry is None or entry.takes_k != bool(at) or (at and not (arg.isascii() and arg.isdigit() and int(arg) >= 1)):
        raise ValueError(f"debias {name!r}: expected one of {GRAMMAR} (K ≥ 1, VARIANT a name in "
                         "reranking.capcal.variants or an answer skeleton)")
    return DebiasSpec(method, int(arg) if at else None)


def probe_channel(name: str) -> str | None:
    """The presentation channel a ``debias`` value probes (``rename@1``: markers, ``skeleton@NAME``: the
    skeleton), None for a method that probes none or a K > 1 view."""
    spec = parse(name)
    entry = DEBIAS_METHODS[spec.method]
    return entry.probe if entry.probe and (not entry.takes_k or spec.k == 1) else None


def options(reranking: dict, name: str) -> dict:
    """The settings debiasing method ``name`` reads from a validated ``reranking`` config section (outside
    the workflow: ``options(config.defaults("reranking"), name)``)."""
    spec = parse(name)
    return DEBIAS_METHODS[spec.method].settings(reranking, spec)


def _list_level(name: str) -> tuple[DebiasSpec, DebiasMethod]:
    spec = parse(name)
    if spec.level != "list":
        raise ValueError(f"debias {name!r} wraps a reranker; it combines no lists")
    return spec, DEBIAS_METHODS[spec.method]


def lists(name: str) -> list[str]:
    """The orders (of debias ``none``) the list-level method ``name`` combines."""
    spec, method = _list_level(name)
    return method.lists(spec)


def combine(name: str, runs: list, settings: dict):
    """One run from the reranked ``runs`` of :func:`lists` (in that order), by the list-level method
    ``name``'s own combine step; ``settings`` from :func:`options`, passed as keywords."""
    _, method = _list_level(name)
    return registry.load(method.combine)(runs, **settings)


def wrap(base, name: str, seed: int, settings: dict):
    """``base`` with the debiasing method ``name`` applied (``base`` itself for ``none``); ``settings``
    from :func:`options`."""
    spec = parse(name)
    if spec.level != "window":
        raise ValueError(f"debias {name!r} combines reranked lists (posbias.debias.list_level); it does not wrap a reranker")
    build = DEBIAS_METHODS[spec.method].build
    return base if build is None else build(base, spec, seed, settings)
