"""The training methods: the one registry that says what each ``training.<name>.method`` means.

Every other place that needs to know about a method (the config checks, the ``train`` rule's
inputs, the trainer's objective, the silver-label stage, the paper tables) asks this registry;
nothing else lists method names. To add a method, add one :class:`TrainingMethod` here; a listwise
method's new loss term is one :class:`~posbias.training.listwise.ObjectiveTerm` in
:data:`posbias.training.listwise.TERMS` (its maths in :mod:`posbias.losses` where it is a paper's
formula). What differs between families (inputs, batches, objective) is :mod:`posbias.training.families`.

Two families share the trainer:

- ``listwise`` (First): a causal LM read at the answer's opening ``[``; the objective is
  ``rank_weight · L_rank(-IPS) + lm_weight · L_LM`` over the method's ``terms`` (``rank``, ``lm``), the
  rank term IPS-weighted for ``ips``; the data is an augmented listwise training set, and ω when ``ips``.
- ``pointwise`` (the Grades scorer of OC-SFT and its baselines): silver-labelled windows; the
  order-consistency penalty is on for ``consistency``, the slot propensity weights the supervised
  term for ``ips``, ``views`` says how the collator presents a window (``anchor``: the anchor
  view the teacher labelled, a seeded permutation fixed for the run; ``anchor+permutations``: it,
  supervised, plus N − 1 more;
  ``one_permutation``: a fresh seeded permutation every epoch), ``markers`` how each view labels its
  slots (``fixed``: ``[1] … [B]`` in slot order; ``drawn``: every view a seeded relabelling drawn anew each
  epoch, marker-diverse SFT; ``penalty``: one view more, the anchor's order with its markers relabelled,
  so the penalty ties a marker renaming as well as the orders), ``shuffled_silver`` asks for teacher
  labels over T shuffles, ``ema_teacher`` centres the penalty on an EMA mean teacher's scores.
"""

from __future__ import annotations

from dataclasses import dataclass

TRAINING_FAMILY_NAMES = ("listwise", "pointwise")
VIEWS = ("anchor", "anchor+permutations", "one_permutation")
MARKERS = ("fixed", "drawn", "penalty")


@dataclass(frozen=True)
class TrainingMethod:
    """What one training method is: its family, which loss terms it uses and what data it needs."""

    name: str
    family: str
    label: str  # as tables and figures print it (the papers' names)
    summary: str
    terms: tuple[str, ...] = ()  # listwise: the objective's terms (posbias.training.listwise.TERMS: rank, lm)
    ips: bool = False  # listwise: IPS-weighted rank loss (needs ω); pointwise: 1/π(slot) weights
    consistency: bool = False  # pointwise: the order-consistency penalty λ
    views: str = "anchor"  # pointwise: how the collator presents each window
    shuffled_silver: bool = False  # pointwise: silver labels over T teacher shuffles
    averaged_targets: bool = False  # pointwise: targets averaged over the teacher's shuffles
    anchor: bool = True  # pointwise: only view 0 is supervised (False: every view, the no-anchor ablation)
    markers: str = "fixed"  # pointwise: how the views label their slots (MARKERS)
    ema_teacher: bool = False  # pointwise: the penalty's centre is an EMA mean teacher's (posbias.training.ema)
    ours: bool = False  # our construction of a baseline a paper names without its form: tables print the label

    def __post_init__(self) -> None:
        if self.family not in TRAINING_FAMILY_NAMES:
            raise ValueError(f"training method {self.name}: family {self.family!r} is not one of {TRAINING_FAMILY_NAMES}")
        if self.views not in VIEWS:
            raise ValueError(f"training method {self.name}: views {self.views!r} is not one of {VIEWS}")
        if self.markers not in MARKERS:
            raise ValueError(f"training method {self.name}: markers {self.markers!r} is not one of {MARKERS}")

    @property
    def on_lambda_grid(self) -> bool:
        """Whether the method is OC-SFT's objective at some λ (the anchor alone supervised, plain
        targets, no weights, fixed markers, its own views' mean as the penalty's centre, no listwise objective
        terms): OC-SFT itself, and single order as λ = 0."""
        return (not self.terms and self.anchor and self.views != "one_permutation" and not self.ips
                and not self.averaged_targets and self.markers == "fixed" and not self.ema_teacher)

    @property
    def needs_omega(self) -> bool:
        """Whether the train job reads the propensity estimate ω: the IPS-weighted rank term's weights
        (pointwise IPS weighs by the teacher's slot propensity instead)."""
        return self.ips and "rank" in self.terms


TRAINING_METHODS: dict[str, TrainingMethod] = {m.name: m for m in (
    TrainingMethod("first", "listwise", "Rank + LM", "First: rank loss + LM loss", terms=("rank", "lm")),
    TrainingMethod("debiasfirst", "listwise", "Rank-IPS + LM", "DebiasFirst: IPS-weighted rank loss + LM loss",
                   terms=("rank", "lm"), ips=True),
    TrainingMethod("rank", "listwise", "Rank", "ablation: rank loss alone", terms=("rank",)),
    TrainingMethod("rank_ips", "listwise", "Rank-IPS", "ablation: IPS-weighted rank loss alone", terms=("rank",),
                   ips=True),
    TrainingMethod("rank_ips_lm", "listwise", "Rank-IPS + LM", "ablation: DebiasFirst's objective on any augmentation",
                   terms=("rank", "lm"), ips=True),
    TrainingMethod("ocsft", "pointwise", "OC-SFT", "OC-SFT: supervised anchor view + order-consistency penalty",
                   consistency=True, views="anchor+permutations"),
    TrainingMethod("ocsft_no_anchor", "pointwise", "OC-SFT, no anchor",
                   "ablation: every view supervised + the order-consistency penalty", consistency=True,
                   views="anchor+permutations", anchor=False),
    TrainingMethod("single_order", "pointwise", "single order", "baseline: the anchor view alone (OC-SFT at λ = 0)"),
    TrainingMethod("order_averaged", "pointwise", "order-averaged", "baseline: targets averaged over T teacher shuffles",
                   shuffled_silver=True, averaged_targets=True),
    TrainingMethod("perm_aug", "pointwise", "permutation augmentation", "baseline: one seeded permutation per step",
                   views="one_permutation"),
    TrainingMethod("debiasfirst_pointwise", "pointwise", "pointwise DebiasFirst (ours: slot IPS)",
                   "baseline, our construction (the OC-SFT paper names DebiasFirst without its pointwise form): "
                   "supervised term weighted by the teacher's inverse slot propensity, clipped and normalised to "
                   "mean 1; no Pos-Aug, no rank loss",
                   ips=True, shuffled_silver=True, ours=True),
    TrainingMethod("ocsft_ema", "pointwise", "OC-SFT, EMA mean teacher",
                   "ablation: OC-SFT whose penalty ties every view to an EMA mean teacher's mean score over the "
                   "views instead of the student's own", consistency=True, views="anchor+permutations",
                   ema_teacher=True),
    TrainingMethod("marker_sft", "pointwise", "marker-diverse SFT",
                   "ablation (marker channel): the anchor view alone, its slots relabelled by a seeded permutation "
                   "of the markers drawn anew every epoch", markers="drawn"),
    TrainingMethod("ocsft_markers", "pointwise", "OC-SFT + marker penalty",
                   "ablation (marker channel): OC-SFT with one view more, the anchor's order with its markers "
                   "relabelled, so the penalty ties a marker renaming too", consistency=True,
                   views="anchor+permutations", markers="penalty"),
)}


# Hyper-parameters only some methods read (training.<name>.hyper.<key>): a listwise loss term's weight, read by
# the methods that name the term (posbias.training.listwise.TERMS holds the same weight names: a test ties the
# two); a trait's keys, read by the methods that have it; a family's, read by the methods of that family. A train
# job leaves out of its params what its method does not read, so adding a key (a new term's weight, ema_decay in
# 0.17.0) retrains no method that does not read it. Any other key is the trainer's: every method reads it.
TERM_HYPER = {"rank": "rank_weight", "lm": "lm_weight"}
TRAIT_HYPER = {"ema_decay": "ema_teacher", "ips_clip": "ips", "ips_floor": "ips", "ips_normalize": "ips"}
FAMILY_HYPER = {"lm_tokens": "listwise", "lm_softmax": "listwise", "views": "pointwise", "resample_views": "pointwise",
                "consistency": "pointwise", "consistency_warmup": "pointwise", "consistency_form": "pointwise"}


def reads_hyper(method: str, key: str) -> bool:
    """Whether training method ``method`` reads ``training.<name>.hyper.<key>`` (derived from its terms,
    traits and family: :data:`TERM_HYPER`, :data:`TRAIT_HYPER`, :data:`FAMILY_HYPER`)."""
    spec = get(method)
    term = next((name for name, weight in TERM_HYPER.items() if weight == key), None)
    if term is not None:
        return term in spec.terms
    if key in TRAIT_HYPER:
        return bool(getattr(spec, TRAIT_HYPER[key]))
    return FAMILY_HYPER.get(key, spec.family) == spec.family


def get(name: str) -> TrainingMethod:
    """The method called ``name``; a one-line error listing the known ones otherwise."""
    try:
        return TRAINING_METHODS[name]
    except KeyError:
        raise ValueError(f"training method {name!r} is unknown; use one of {', '.join(TRAINING_METHODS)}") from None


def names(family: str | None = None) -> list[str]:
    """The method names, of one family if given, in registry order."""
    return [n for n, m in TRAINING_METHODS.items() if family is None or m.family == family]
