"""The project's one reporting layer: the papers' tables (Markdown, CSV, LaTeX) and figures (PNG, PDF).

One module per table or figure; :mod:`~posbias.paper.stats` (paired tests, Holm, seeds' mean ± sd),
:mod:`~posbias.paper.seeds` (training seeds as variants) and :mod:`~posbias.paper.writers` (how
tables and figures are written) serve them all. :data:`TABLES` and :data:`FIGURES` register what
the ``paper_table`` and ``paper_figure`` rules build from the reranking results: each entry names
the inputs its builder takes (keyword arguments of :func:`build` / :func:`draw`), so the rules load
them once and pass what is asked.

To add a paper table: a module here with a builder returning a :class:`Table`, and one
:class:`PaperTable` line below; the rule picks it up (its name becomes a ``table`` wildcard value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posbias.paper.ablation_curves import ablation_curves_figure
from posbias.paper.ablations import ablations
from posbias.paper.capcal import capcal
from posbias.paper.inference_vs_training import inference_vs_training_figure
from posbias.paper.original_vs_shuffled import original_vs_shuffled
from posbias.paper.position_bias import position_bias
from posbias.paper.position_curve import position_curve_figure
from posbias.paper.retrievers import retrievers
from posbias.paper.consumers import decisions_table
from posbias.paper.stability import ocsft_settings, stability, stability_all
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.paper.versus_baselines import versus_baselines
from posbias.paper.writers import Table, fmt, fmt_sd, write

INPUTS = ("metrics", "summaries", "curves", "first_stage", "training", "reference")
CONFIG_INPUTS = ("training", "reference")  # from the config (rule params), not result files


@dataclass(frozen=True)
class PaperTable:
    """A table of the ``paper_table`` rule: its title and the inputs its builder takes, in order."""

    title: str
    inputs: tuple[str, ...]
    builder: Callable[..., Table]


@dataclass(frozen=True)
class PaperFigure:
    """A figure of the ``paper_figure`` rule: its title and the inputs its drawer takes (then the path)."""

    title: str
    inputs: tuple[str, ...]
    drawer: Callable


TABLES: dict[str, PaperTable] = {
    "position_bias": PaperTable(
        "Position effect and its removal: curve spread and shuffled-order quality (DebiasFirst Figure 4)",
        ("summaries", "curves", "training"), position_bias),
    "original_vs_shuffled": PaperTable(
        "nDCG@10 under the original and shuffled input orders (DebiasFirst Table 1)",
        ("metrics", "training"), original_vs_shuffled),
    "retrievers": PaperTable(
        "Reranking different first-stage runs (DebiasFirst Table 2)",
        ("metrics", "first_stage", "training"), retrievers),
    "capcal": PaperTable(
        "Content-agnostic calibration: quality and cost (CapCal)", ("metrics", "summaries"), capcal),
    "ablations": PaperTable(
        "Objective × augmentation ablations (DebiasFirst Table 3)", ("summaries", "curves", "training"), ablations),
    "versus_baselines": PaperTable(
        "The reference model against each baseline, original and shuffled orders (DebiasFirst Table 1)",
        ("metrics", "training", "reference"), versus_baselines),
}

FIGURES: dict[str, PaperFigure] = {
    "position_curve": PaperFigure(
        "Position curve: the relevant passage moved to each input position (DebiasFirst Figure 4)",
        ("curves", "training"), position_curve_figure),
    "inference_vs_training": PaperFigure(
        "Training- vs inference-time debiasing per shuffle seed, PermSC against K (DebiasFirst Figure 5)",
        ("metrics", "training"), inference_vs_training_figure),
    "ablation_curves": PaperFigure(
        "Position curves of the objective × augmentation ablations (DebiasFirst Figure 6)",
        ("curves", "training"), ablation_curves_figure),
}

STABILITY_TITLE = "Pointwise scorers: quality vs decision stability (OC-SFT)"
STABILITY_ALL_TITLE = "Listwise and pointwise rerankers on the same stability metrics and queries"
OCSFT_SETTINGS_TITLE = "OC-SFT settings: consistency weight λ, views N and the anchor"
BASES_TITLE = "OC-SFT over base models: its stability gain over single order, per base and pooled over cells"
CONSUMERS_TITLE = "OC-SFT consumers: decisions and their flips across presentations"


def needs(entry: PaperTable | PaperFigure) -> set[str]:
    """The result files (of :data:`INPUTS`, less the config's ``training``) an entry reads."""
    return set(entry.inputs) - set(CONFIG_INPUTS)


def build(name: str, **inputs) -> Table:
    """The table ``name`` from the inputs it declares (other keyword arguments are ignored)."""
    if name not in TABLES:
        raise ValueError(f"unknown paper table {name!r}; use one of {', '.join(TABLES)}")
    entry = TABLES[name]
    return entry.builder(*(inputs[key] for key in entry.inputs))


def draw(name: str, path: str | Path, **inputs) -> None:
    """The figure ``name`` written to ``path`` (PNG) and its PDF sibling."""
    if name not in FIGURES:
        raise ValueError(f"unknown paper figure {name!r}; use one of {', '.join(FIGURES)}")
    entry = FIGURES[name]
    entry.drawer(*(inputs[key] for key in entry.inputs), path)


__all__ = ["ALPHA", "BASES_TITLE", "CONSUMERS_TITLE", "FIGURES", "INPUTS", "OCSFT_SETTINGS_TITLE", "PaperFigure", "PaperTable", "STABILITY_ALL_TITLE",
           "STABILITY_TITLE", "TABLES", "Table", "ablations", "build", "capcal", "decisions_table", "draw", "fmt", "fmt_sd", "holm",
           "mean_sd", "needs", "ocsft_settings", "original_vs_shuffled", "paired_pvalue", "position_bias",
           "retrievers", "stability", "stability_all", "versus_baselines", "write"]
