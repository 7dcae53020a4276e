"""The papers' tables from the workflow's metrics: numbers (CSV) and formatted views (Markdown, LaTeX).

Every builder returns a :class:`Table`: ``data`` holds the numbers in long or wide form (the CSV),
``view`` the formatted cells (strings, significance marks), ``notes`` what a reader needs beyond
the cells (test, correction, query counts). :func:`write` writes all three formats.

Significance: paired two-sided Wilcoxon signed-rank tests over queries (``scipy.stats.wilcoxon``;
zero differences dropped, ``zero_method="wilcox"``), Holm-corrected within the family stated in
each table's notes (``scipy.stats.false_discovery_control`` does Benjamini–Hochberg only, so
:func:`holm` implements Holm's step-down, which is four lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from posbias.report import fmt

ALPHA = 0.05


@dataclass
class Table:
    data: pl.DataFrame
    view: pl.DataFrame
    notes: str


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1); NaN stays NaN."""
    indexed = [(p, i) for i, p in enumerate(pvalues) if not math.isnan(p)]
    indexed.sort()
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    m = len(indexed)
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def paired_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired per-query values (NaN when all differences are 0)."""
    from scipy.stats import wilcoxon

    if len(a) < 2 or np.allclose(a, b):
        return math.nan
    return float(wilcoxon(a, b, zero_method="wilcox").pvalue)


def _per_query(metrics: pl.DataFrame, measure: str = "nDCG@10") -> pl.DataFrame:
    return metrics.filter(pl.col("measure") == measure)


def original_vs_shuffled(metrics: pl.DataFrame) -> Table:
    """DebiasFirst Table 1: nDCG@10 per model × dataset under the original order and shuffled orders.

    ``metrics``: RERANK_METRICS of the plain models (debias ``none``). Shuffled = mean over the shuffle
    seeds; the test pairs each query's original nDCG@10 with its mean over the shuffles; family: one
    model's datasets (Holm).
    """
    q = _per_query(metrics).filter(pl.col("debias") == "none")
    rows = []
    for (model, dataset, retriever), group in q.group_by("model", "dataset", "retriever", maintain_order=True):
        orig = group.filter(pl.col("order") == "original").select("query_id", pl.col("value").alias("orig"))
        shuf = (group.filter(pl.col("order").str.starts_with("shuffled-")).group_by("query_id")
                .agg(pl.col("value").mean().alias("shuf")))
        seeds = group.filter(pl.col("order").str.starts_with("shuffled-"))["order"].n_unique()
        paired = orig.join(shuf, on="query_id")
        rows.append({"model": model, "dataset": dataset, "retriever": retriever, "queries": paired.height,
                     "shuffles": seeds, "ndcg10_original": orig["orig"].mean(),
                     "ndcg10_shuffled": shuf["shuf"].mean() if shuf.height else math.nan,
                     "p": paired_pvalue(paired["orig"].to_numpy(), paired["shuf"].to_numpy())
                     if paired.height else math.nan})
    data = pl.DataFrame(rows, schema={"model": pl.String, "dataset": pl.String, "retriever": pl.String,
                                      "queries": pl.Int64, "shuffles": pl.Int64, "ndcg10_original": pl.Float64,
                                      "ndcg10_shuffled": pl.Float64, "p": pl.Float64})
    adjusted = []
    for model in data["model"].unique(maintain_order=True):
        family = data.filter(pl.col("model") == model)
        adjusted += list(zip(family["dataset"], family["retriever"], [model] * family.height,
                             holm(family["p"].to_list())))
    data = data.join(pl.DataFrame(adjusted, schema=["dataset", "retriever", "model", "p_holm"], orient="row"),
                     on=["model", "dataset", "retriever"])
    columns = [f"{d} ({r})" for d, r in data.select("dataset", "retriever").unique(maintain_order=True).iter_rows()]
    view_rows = []
    for model in data["model"].unique(maintain_order=True):
        family = data.filter(pl.col("model") == model)
        row = {"model": model}
        for r in family.iter_rows(named=True):
            mark = "†" if r["p_holm"] < ALPHA else ""
            row[f"{r['dataset']} ({r['retriever']})"] = (f"{fmt(r['ndcg10_original'])} / "
                                                         f"{fmt(r['ndcg10_shuffled'])}{mark}")
        row["average"] = f"{fmt(family['ndcg10_original'].mean())} / {fmt(family['ndcg10_shuffled'].mean())}"
        view_rows.append(row)
    view = pl.DataFrame(view_rows).select("model", *[c for c in columns if c in pl.DataFrame(view_rows).columns],
                                          "average")
    notes = ("Cells: nDCG@10 original / shuffled (mean over the shuffle seeds). † shuffled differs from original "
             f"at α = {ALPHA}: two-sided Wilcoxon signed-rank test over queries, pairing each query's original "
             "nDCG@10 with its mean over the shuffles, Holm-corrected over each model's datasets. Queries per "
             "cell and shuffle counts are in the CSV.")
    return Table(data, view.fill_null("–"), notes)


def retrievers(metrics: pl.DataFrame, first_stage: pl.DataFrame) -> Table:
    """DebiasFirst Table 2: reranked nDCG@10 (original order) per model and dataset × first-stage retriever,
    with the first-stage run itself as the first row."""
    q = _per_query(metrics).filter((pl.col("debias") == "none") & (pl.col("order") == "original"))
    reranked = q.group_by("model", "dataset", "retriever", maintain_order=True).agg(
        pl.col("value").mean().alias("ndcg10"), pl.len().alias("queries"))
    pairs = reranked.select("dataset", "retriever").unique(maintain_order=True)
    base = (_per_query(first_stage).rename({"system": "retriever"})
            .join(pairs, on=["dataset", "retriever"]).group_by("dataset", "retriever", maintain_order=True)
            .agg(pl.col("value").mean().alias("ndcg10"), pl.len().alias("queries"))
            .with_columns(model=pl.lit("first stage")))
    data = pl.concat([base.select(reranked.columns), reranked])
    view = data.with_columns(column=pl.col("dataset") + " · " + pl.col("retriever"),
                             cell=pl.col("ndcg10").map_elements(fmt, return_dtype=pl.String))
    view = view.pivot(on="column", index="model", values="cell").fill_null("–")
    notes = ("nDCG@10 of each model reranking each first-stage run's top candidates in the original order; "
             "the first row is the first-stage run (all judged queries; reranked rows over the queries reranked).")
    return Table(data, view, notes)


def capcal(metrics: pl.DataFrame, summaries: pl.DataFrame) -> Table:
    """CapCal: nDCG@10 without and with calibration per model × dataset, original and shuffled orders,
    with the cost per query; paired test none vs capcal on the original order, Holm over all rows."""
    q = _per_query(metrics).filter(pl.col("debias").is_in(["none", "capcal"]))
    rows = []
    for (model, dataset, retriever), group in q.group_by("model", "dataset", "retriever", maintain_order=True):
        if set(group["debias"].unique()) != {"none", "capcal"}:
            continue
        orig = group.filter(pl.col("order") == "original").pivot(on="debias", index="query_id", values="value")
        shuf = group.filter(pl.col("order").str.starts_with("shuffled-")).group_by("debias").agg(pl.col("value").mean())
        shuf = dict(shuf.iter_rows())
        cost = summaries.filter((pl.col("model") == model) & (pl.col("dataset") == dataset)
                                & (pl.col("retriever") == retriever))
        cost = {r["debias"]: r for r in cost.iter_rows(named=True)}
        rows.append({"model": model, "dataset": dataset, "retriever": retriever, "queries": orig.height,
                     "ndcg10_original": orig["none"].mean(), "ndcg10_original_capcal": orig["capcal"].mean(),
                     "ndcg10_shuffled": shuf.get("none", math.nan), "ndcg10_shuffled_capcal": shuf.get("capcal", math.nan),
                     "calls_per_query": cost.get("none", {}).get("calls_per_query", math.nan),
                     "calls_per_query_capcal": cost.get("capcal", {}).get("calls_per_query", math.nan),
                     "seconds_per_query": cost.get("none", {}).get("seconds_per_query", math.nan),
                     "seconds_per_query_capcal": cost.get("capcal", {}).get("seconds_per_query", math.nan),
                     "p": paired_pvalue(orig["none"].to_numpy(), orig["capcal"].to_numpy())})
    data = pl.DataFrame(rows)
    if data.height:
        data = data.with_columns(p_holm=pl.Series(holm(data["p"].to_list())))
    view = pl.DataFrame([{
        "model": r["model"], "dataset": f"{r['dataset']} · {r['retriever']}",
        "original": fmt(r["ndcg10_original"]),
        "+ CapCal": fmt(r["ndcg10_original_capcal"]) + ("†" if r["p_holm"] < ALPHA else ""),
        "shuffled": fmt(r["ndcg10_shuffled"]), "shuffled + CapCal": fmt(r["ndcg10_shuffled_capcal"]),
        "calls/query": f"{fmt(r['calls_per_query'], 1)} → {fmt(r['calls_per_query_capcal'], 1)}",
        "s/query": f"{fmt(r['seconds_per_query'], 3)} → {fmt(r['seconds_per_query_capcal'], 3)}",
    } for r in data.iter_rows(named=True)]) if data.height else pl.DataFrame({"model": []})
    notes = ("nDCG@10 without and with CapCal (content-agnostic calibration). † differs from the uncalibrated "
             f"original-order run at α = {ALPHA}: two-sided Wilcoxon signed-rank test over queries, Holm-corrected "
             "over all rows. Cost: model calls and seconds per query, uncalibrated → calibrated (the "
             "content-free prior is computed once per query and window size).")
    return Table(data, view, notes)


def ablations(summaries: pl.DataFrame, curves: pl.DataFrame, training: dict) -> Table:
    """DebiasFirst Table 3: objective (rows) × augmentation (columns) of the trained models: nDCG@10
    under shuffled orders (mean ± sd over seeds) and the variance of the position curve."""
    runs = {name: run for name, run in training.items() if run.get("aug") is not None}
    rows = []
    for name, run in runs.items():
        s = summaries.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        c = curves.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        for r in s.iter_rows(named=True):
            values = c.filter((pl.col("dataset") == r["dataset"]) & (pl.col("retriever") == r["retriever"]))
            rows.append({"model": name, "method": run["method"], "aug": run["aug"], "dataset": r["dataset"],
                         "retriever": r["retriever"], "ndcg10_shuffled": r["ndcg10_shuffled_mean"],
                         "ndcg10_shuffled_sd": r["ndcg10_shuffled_sd"],
                         "curve_variance": float(np.var(values["target_ndcg10"].to_numpy())) if values.height
                         else math.nan})
    data = pl.DataFrame(rows)
    if not data.height:
        return Table(data, pl.DataFrame({"method": []}), "No training entries with an augmentation are configured.")
    view = data.with_columns(
        cell=pl.struct("ndcg10_shuffled", "ndcg10_shuffled_sd", "curve_variance").map_elements(
            lambda r: f"{fmt(r['ndcg10_shuffled'])} ± {fmt(r['ndcg10_shuffled_sd'], 3)} (var {fmt(r['curve_variance'], 3)})",
            return_dtype=pl.String),
        column=pl.col("aug") + " · " + pl.col("dataset"))
    view = view.pivot(on="column", index="method", values="cell").fill_null("–")
    notes = ("nDCG@10 under shuffled orders (mean ± sd over the shuffle seeds) and, in brackets, the variance "
             "over input positions of the position curve (nDCG@10 of the moved relevant passage); lower variance "
             "= less position bias.")
    return Table(data, view, notes)


TABLES = {
    # name: (title, builder inputs)
    "original_vs_shuffled": "nDCG@10 under the original and shuffled input orders (DebiasFirst Table 1)",
    "retrievers": "Reranking different first-stage runs (DebiasFirst Table 2)",
    "capcal": "Content-agnostic calibration: quality and cost (CapCal)",
    "ablations": "Objective × augmentation ablations (DebiasFirst Table 3)",
}


def build(name: str, metrics: pl.DataFrame, summaries: pl.DataFrame, curves: pl.DataFrame,
          first_stage: pl.DataFrame, training: dict) -> Table:
    """The table ``name`` (a key of :data:`TABLES`) from the concatenated reranking results."""
    if name == "original_vs_shuffled":
        return original_vs_shuffled(metrics)
    if name == "retrievers":
        return retrievers(metrics, first_stage)
    if name == "capcal":
        return capcal(metrics, summaries)
    if name == "ablations":
        return ablations(summaries, curves, training)
    raise ValueError(f"unknown paper table {name!r}; use one of {sorted(TABLES)}")


def write(table: Table, stem: str | Path, title: str) -> list[Path]:
    """``stem``.md (title, table, notes), ``stem``.csv (the numbers) and ``stem``.tex (booktabs)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    view = table.view
    header = "| " + " | ".join(view.columns) + " |"
    lines = [f"# {title}", "", header, "|" + "---|" * len(view.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in view.iter_rows()]
    lines += ["", table.notes, ""]
    md, csv, tex = stem.with_suffix(".md"), stem.with_suffix(".csv"), stem.with_suffix(".tex")
    md.write_text("\n".join(lines))
    table.data.write_csv(csv)
    tex.write_text(_latex(view, title, table.notes))
    return [md, csv, tex]


def _latex(view: pl.DataFrame, caption: str, notes: str) -> str:
    """A booktabs table through pandas' Styler (escaping, rules), with the notes in the caption."""
    frame = view.to_pandas()
    styler = frame.style.hide(axis="index").format(escape="latex")
    return styler.to_latex(hrules=True, caption=f"{caption}. {notes}", position_float="centering",
                           convert_css=False).replace("†", r"\textsuperscript{\dag}").replace("±", r"$\pm$") \
        .replace("→", r"$\rightarrow$").replace("–", "--").replace("·", r"$\cdot$").replace("α", r"$\alpha$")
