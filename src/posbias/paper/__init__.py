"""The project's one reporting layer: every table (Markdown, CSV, LaTeX), figure (PNG, PDF) and report data
file the workflow writes.

One module per table or figure; :mod:`~posbias.paper.stats` (paired tests, Holm, seeds' mean ± sd),
:mod:`~posbias.paper.seeds` (training seeds as variants) and :mod:`~posbias.paper.writers` (how
tables and figures are written) serve them all. :data:`TABLES`, :data:`FIGURES` and :data:`FRAMES` register
every one: its title, the rule that builds it and the inputs its builder takes (keyword arguments of
:func:`build` / :func:`draw` / :func:`frame`: kinds of result file, read by :mod:`~posbias.paper.inputs`,
or config values the rule passes as params). Every report rule runs one script
(``workflow/scripts/report.py``), which reads the rule's inputs by kind and calls :func:`produce` for each
registered name the rule writes; nothing builds a table outside this registry.

To add a table to the papers' set: a module here with a builder returning a :class:`Table`, and one
:class:`PaperTable` line below; the ``paper_table`` rule picks it up (its name becomes a ``table`` wildcard
value). A table another rule writes names that rule (``rule=``) and is listed in its ``params.tables``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from posbias import atomic, registry, schemas
from posbias.paper import scope
from posbias.paper.ablation_curves import ablation_curves_figure
from posbias.paper.ablations import ablations
from posbias.paper.adaptive_savings import adaptive_savings
from posbias.paper.augmentation import augmentation_figure, augmentation_table
from posbias.paper.bases import base_cells, bases_figure, bases_table
from posbias.paper.bsc_curve import bsc_figure
from posbias.paper.capcal import capcal
from posbias.paper.channels import channels
from posbias.paper.consumers import decisions_table
from posbias.paper.frontier import frontier, frontier_figure
from posbias.paper.inference_vs_training import inference_vs_training_figure
from posbias.paper.label_budget import label_budget, label_budget_figure
from posbias.paper.matched_retention import matched_retention
from posbias.paper.original_vs_shuffled import original_vs_shuffled
from posbias.paper.pool_figures import pool_psi_figure, pool_summary, variance_figure
from posbias.paper.position_bias import position_bias
from posbias.paper.position_curve import position_curve_figure
from posbias.paper.rerank_overview import rerank_table
from posbias.paper.serving_width import serving_width
from posbias.paper.retrieval import retrieval_table
from posbias.paper.retrievers import retrievers
from posbias.paper.stability import ocsft_settings, stability
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.paper.teachers import teachers, teachers_figure
from posbias.paper.versus_baselines import versus_baselines
from posbias.paper.writers import Table, fmt, fmt_sd, write

# The result-file inputs of the papers' tables and figures (the ``paper_table`` / ``paper_figure`` rules);
# their config inputs come as the rules' params.
INPUTS = ("metrics", "summaries", "curves", "first_stage", "training", "reference")
CONFIG_INPUTS = ("training", "reference")


class _Titled:
    """An entry whose title is its description (in the one-line error for an unknown name)."""

    @property
    def description(self) -> str:
        return self.title


@dataclass(frozen=True)
class PaperTable(_Titled):
    """A table: its title (formatted with the job's wildcards), the inputs its builder takes, in order, the
    builder (a function, or ``"module:function"`` for one outside the reporting layer, imported when a job
    builds it) and the rule that writes it."""

    title: str
    inputs: tuple[str, ...]
    builder: Callable[..., Table] | str
    rule: str = "paper_table"
    when: Callable[[dict], bool] = scope.always  # whether a config gives it rows (posbias.paper.scope)


@dataclass(frozen=True)
class PaperFigure(_Titled):
    """A figure: its title, the inputs its drawer takes (then the path) and the rule that draws it."""

    title: str
    inputs: tuple[str, ...]
    drawer: Callable
    rule: str = "paper_figure"
    when: Callable[[dict], bool] = scope.always  # whether a config gives it data (posbias.paper.scope)


@dataclass(frozen=True)
class PaperFrame:
    """A report data file (Parquet, checked against ``schema``, or CSV): what it holds, the inputs its
    builder takes, the builder (returning a DataFrame) and the rule that writes it."""

    description: str
    inputs: tuple[str, ...]
    builder: Callable[..., pl.DataFrame]
    rule: str
    schema: str | None = None


def _position_curve_all(curves: pl.DataFrame, path) -> None:
    """Every model its own line (no seed pooling), every debiasing method its own curve."""
    position_curve_figure(curves, {}, path, debias=None)


def _bases_table(stability: pl.DataFrame, pairs, variants, dev) -> Table:
    return bases_table(base_cells(stability, pairs, variants, dev))


def _bases_figure(stability: pl.DataFrame, pairs, variants, dev, path) -> None:
    bases_figure(base_cells(stability, pairs, variants, dev), path)


def _bsc_curve(stability: pl.DataFrame, references, path) -> None:
    bsc_figure(stability, path, references)


def _pool_figure(drawer: Callable) -> Callable:
    def draw(pool: pl.DataFrame, variants, reference, path) -> None:
        drawer(pool_summary(pool, variants, reference), path)

    return draw


TABLES: dict[str, PaperTable] = {
    "position_bias": PaperTable(
        "Position effect and its removal: curve spread and shuffled-order quality (DebiasFirst Figure 4)",
        ("summaries", "curves", "training"), position_bias, when=scope.with_order("position")),
    "original_vs_shuffled": PaperTable(
        "nDCG@10 under the original and shuffled input orders (DebiasFirst Table 1)",
        ("metrics", "training"), original_vs_shuffled, when=scope.original_and_shuffled),
    "retrievers": PaperTable(
        "Reranking different first-stage runs (DebiasFirst Table 2)",
        ("metrics", "first_stage", "training"), retrievers),
    "capcal": PaperTable(
        "Content-agnostic calibration: quality and cost (CapCal)", ("metrics", "summaries"), capcal,
        when=scope.with_debias("capcal")),
    "ablations": PaperTable(
        "Objective × augmentation ablations (DebiasFirst Table 3)", ("summaries", "curves", "training"), ablations,
        when=scope.listwise_trained),
    "versus_baselines": PaperTable(
        "The reference model against each baseline, original and shuffled orders (DebiasFirst Table 1)",
        ("metrics", "training", "reference"), versus_baselines, when=scope.reference_and_baseline),
    "retrieval": PaperTable("First-stage retrieval", ("retrieval_summary", "measures"), retrieval_table,
                            rule="retrieval_table"),
    "rerank": PaperTable("Listwise reranking under permuted orders", ("summaries", "window", "step"), rerank_table,
                         rule="rerank_tables"),
    "augmentation": PaperTable("Augmentation of {dataset}: input position of the teacher's best passage",
                               ("position_ranks",), augmentation_table, rule="augmentation_report"),
    "stability": PaperTable(
        "Pointwise scorers: quality vs decision stability (OC-SFT)",
        ("stability", "stability_queries", "train_seconds", "variants", "reference", "dev", "settings"), stability,
        rule="stability_table"),
    "ocsft_settings": PaperTable(
        "OC-SFT settings: consistency weight λ, views N and the anchor", ("stability", "variants", "settings", "dev"),
        ocsft_settings, rule="ocsft_settings_table"),
    "matched_retention": PaperTable(
        "Retention overlap at each scorer's F1 threshold and at one matched retention rate (OC-SFT)",
        ("stability", "stability_queries", "variants", "reference", "dev"), matched_retention,
        rule="stability_table"),
    "teachers": PaperTable(
        "Teachers compared: label quality and silver-β against the student's quality and stability (OC-SFT)",
        ("stability", "silver_stats", "teacher_study", "variants", "dev"), teachers, rule="teachers_table"),
    "label_budget": PaperTable(
        "OC-SFT's label budget: the student's quality and stability against the teacher labels it cost (Figure 7)",
        ("stability", "silver_stats", "label_budget", "variants", "dev"), label_budget, rule="label_budget_table"),
    "bases_pooled": PaperTable(
        "OC-SFT over base models: its stability gain over single order, per base and pooled over cells",
        ("stability", "base_pairs", "variants", "dev"), _bases_table, rule="bases_pooled_table"),
    "frontier": PaperTable(
        "Every method on one frontier: quality, decision stability and cost per query",
        ("stability_queries", "stability", "variants", "references", "decisions", "settings"), frontier,
        rule="frontier"),
    "adaptive_savings": PaperTable(
        "Calls an adaptive permutation budget saves against fixed K at equal quality and stability",
        ("stability_queries", "stability", "variants", "decisions"), adaptive_savings, rule="adaptive_savings"),
    "channels": PaperTable(
        "Presentation channels beyond order: held-out marker relabellings and a second answer skeleton, against "
        "order training, marker-diverse SFT and a marker penalty (OC-SFT)",
        ("stability", "stability_queries", "variants", "references"), channels, rule="channels_table"),
    "serving_width": PaperTable(
        "One checkpoint served at several window widths B: quality, stability and latency (OC-SFT)",
        ("stability", "widths"), serving_width, rule="serving_width_table"),
    "consumers": PaperTable(
        "OC-SFT consumers: decisions and their flips across presentations", ("decisions", "variants", "references"),
        decisions_table, rule="decisions_table"),
    "plan_check": PaperTable("Compute plan against the run", ("plan", "costs", "planned"),
                             "posbias.plan.report:checked_table", rule="plan_check"),
}

FIGURES: dict[str, PaperFigure] = {
    "position_curve": PaperFigure(
        "Position curve: the relevant passage moved to each input position (DebiasFirst Figure 4)",
        ("curves", "training"), position_curve_figure, when=scope.with_order("position")),
    "inference_vs_training": PaperFigure(
        "Training- vs inference-time debiasing per shuffle seed, PermSC against K (DebiasFirst Figure 5)",
        ("metrics", "training"), inference_vs_training_figure, when=scope.with_order("shuffled")),
    "ablation_curves": PaperFigure(
        "Position curves of the objective × augmentation ablations (DebiasFirst Figure 6)",
        ("curves", "training"), ablation_curves_figure, when=scope.listwise_trained),
    "position_curve_all": PaperFigure(
        "Position curves of every model and debiasing method", ("curves",), _position_curve_all,
        when=scope.with_order("position")),
    "augmentation": PaperFigure(
        "Augmentation of {dataset}: input position of the teacher's best passage", ("position_ranks",),
        augmentation_figure, rule="augmentation_report"),
    "bsc_curve": PaperFigure("OC-SFT: BSC@K against K", ("stability", "references"), _bsc_curve,
                             rule="stability_table"),
    "bases_pooled": PaperFigure(
        "OC-SFT's stability gain over single order per base model, pooled",
        ("stability", "base_pairs", "variants", "dev"), _bases_figure, rule="bases_pooled_table"),
    "teachers": PaperFigure(
        "OC-SFT: the student's quality against its teacher's silver-β and label quality (Figures 9 and 11)",
        ("stability", "silver_stats", "teacher_study", "variants", "dev"), teachers_figure, rule="teachers_table"),
    "label_budget": PaperFigure(
        "OC-SFT: retention Jaccard and τ-PSI against the label cost (Figure 7)",
        ("stability", "silver_stats", "label_budget", "variants", "dev"), label_budget_figure, rule="label_budget_table"),
    "frontier": PaperFigure(
        "Every method on one frontier: τ-PSI against model calls per query and against nDCG@10",
        ("stability_queries", "stability", "variants", "decisions"), frontier_figure, rule="frontier"),
    "pool_psi": PaperFigure("Pool-PSI per pool design", ("pool", "variants", "reference"),
                            _pool_figure(pool_psi_figure), rule="pool_figures"),
    "variance_decomposition": PaperFigure(
        "Within-document score variance: companions and slot", ("pool", "variants", "reference"),
        _pool_figure(variance_figure), rule="pool_figures"),
}

FRAMES: dict[str, PaperFrame] = {
    "retrieval_summary": PaperFrame("every first-stage run's mean per measure", ("retrieval_summary",),
                                    lambda summary: summary, "retrieval_table", "summary"),
    "pool": PaperFrame("Pool-PSI and the variance shares per pool design and variant",
                       ("pool", "variants", "reference"), pool_summary, "pool_figures"),
}

def needs(entry: PaperTable | PaperFigure) -> set[str]:
    """The result files (of :data:`INPUTS`, less the config's ``training``) an entry reads."""
    return set(entry.inputs) - set(CONFIG_INPUTS)


def names(entries: dict, rule: str) -> list[str]:
    """The registered names a rule writes."""
    return [name for name, entry in entries.items() if entry.rule == rule]


def filled(entries: dict, rule: str, config: dict) -> list[str]:
    """The names a rule writes that the prepared ``config`` gives rows to (each entry's ``when``)."""
    return [name for name in names(entries, rule) if entries[name].when(config)]


def _arguments(entry, inputs: dict) -> list:
    missing = [key for key in entry.inputs if key not in inputs]
    if missing:
        raise ValueError(f"the {entry.rule} rule gives no {', '.join(missing)}; add them to its input or params")
    return [inputs[key] for key in entry.inputs]


def build(name: str, **inputs) -> Table:
    """The table ``name`` from the inputs it declares (other keyword arguments are ignored)."""
    entry = registry.entry(TABLES, name, "table")
    builder = registry.load(entry.builder) if isinstance(entry.builder, str) else entry.builder
    return builder(*_arguments(entry, inputs))


def draw(name: str, path: str | Path, **inputs) -> None:
    """The figure ``name`` written to ``path`` (PNG) and its PDF sibling."""
    entry = registry.entry(FIGURES, name, "figure")
    entry.drawer(*_arguments(entry, inputs), path)


def frame(name: str, path: str | Path, **inputs) -> None:
    """The report data file ``name`` written to ``path`` (Parquet against its schema, or CSV), atomically."""
    entry = registry.entry(FRAMES, name, "report data file")
    data = entry.builder(*_arguments(entry, inputs))
    if entry.schema:
        schemas.write(data, path, entry.schema)
    else:
        with atomic.replacing(Path(path)) as tmp:
            data.write_csv(tmp)


def produce(tables: dict[str, str], figures: dict[str, str], frames: dict[str, str], wildcards: dict,
            **inputs) -> list[str]:
    """Every table (``{name: its .md path}``), figure (``{name: its .png path}``) and data file
    (``{name: path}``) of one report job, each by its registered builder; the paths written."""
    written = []
    for name, md in tables.items():
        written += map(str, write(build(name, **inputs), str(md)[: -len(".md")],
                                  TABLES[name].title.format(**wildcards)))
    for name, png in figures.items():
        draw(name, png, **inputs)
        written += [str(png), str(Path(png).with_suffix(".pdf"))]
    for name, path in frames.items():
        frame(name, path, **inputs)
        written.append(str(path))
    return written


__all__ = ["ALPHA", "FIGURES", "FRAMES", "INPUTS", "PaperFigure", "PaperFrame", "PaperTable", "TABLES", "Table",
           "ablations", "build", "capcal", "decisions_table", "draw", "fmt", "fmt_sd", "frame", "holm", "mean_sd",
           "filled", "names", "needs", "ocsft_settings", "original_vs_shuffled", "paired_pvalue", "position_bias", "produce",
           "retrievers", "stability", "frontier", "versus_baselines", "write"]
