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

from posbias.config import POINTWISE_METHODS, variant_of
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


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample sd (NaN sd for a single value) of a sequence of numbers."""
    array = np.asarray(list(values), dtype=float)
    if not len(array):
        return math.nan, math.nan
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else math.nan


def fmt_sd(mean: float, sd: float, digits: int = 4) -> str:
    """``mean ± sd``, or just the mean when there is no spread to report (one seed)."""
    return fmt(mean, digits) if math.isnan(sd) else f"{fmt(mean, digits)} ± {fmt(sd, digits)}"


def _with_variants(frame: pl.DataFrame, training: dict) -> pl.DataFrame:
    names = {m: variant_of(training, m) for m in frame["model"].unique().to_list()}
    return frame.with_columns(variant=pl.col("model").replace_strict(names, return_dtype=pl.String))


def _per_query(metrics: pl.DataFrame, measure: str = "nDCG@10") -> pl.DataFrame:
    return metrics.filter(pl.col("measure") == measure)


def original_vs_shuffled(metrics: pl.DataFrame, training: dict | None = None) -> Table:
    """DebiasFirst Table 1: nDCG@10 per model × dataset under the original order and shuffled orders.

    ``metrics``: RERANK_METRICS of the plain models (debias ``none``). Shuffled = mean over the shuffle
    seeds. A model trained with several seeds (``training.<name>.seeds``) is one row: cells are
    mean ± sd over its seeds, and each query's value is averaged over the seeds before the test.
    The test pairs each query's original nDCG@10 with its mean over the shuffles; family: one
    model's datasets (Holm).
    """
    q = _with_variants(_per_query(metrics).filter(pl.col("debias") == "none"), training or {})
    rows = []
    for (variant, dataset, retriever), group in q.group_by("variant", "dataset", "retriever", maintain_order=True):
        shuffled = pl.col("order").str.starts_with("shuffled-")
        per_model = group.group_by("model", "query_id", maintain_order=True).agg(
            orig=pl.col("value").filter(pl.col("order") == "original").mean(),
            shuf=pl.col("value").filter(shuffled).mean())
        by_model = per_model.group_by("model", maintain_order=True).agg(pl.col("orig").mean(), pl.col("shuf").mean())
        paired = per_model.group_by("query_id").agg(pl.col("orig").mean(), pl.col("shuf").mean()).drop_nulls()
        orig, orig_sd = mean_sd(by_model["orig"].drop_nulls())
        shuf, shuf_sd = mean_sd(by_model["shuf"].drop_nulls())
        rows.append({"model": variant, "dataset": dataset, "retriever": retriever, "seeds": by_model.height,
                     "queries": paired.height, "shuffles": group.filter(shuffled)["order"].n_unique(),
                     "ndcg10_original": orig, "ndcg10_original_sd": orig_sd,
                     "ndcg10_shuffled": shuf, "ndcg10_shuffled_sd": shuf_sd,
                     "p": paired_pvalue(paired["orig"].to_numpy(), paired["shuf"].to_numpy())
                     if paired.height else math.nan})
    data = pl.DataFrame(rows, schema={"model": pl.String, "dataset": pl.String, "retriever": pl.String,
                                      "seeds": pl.Int64, "queries": pl.Int64, "shuffles": pl.Int64,
                                      "ndcg10_original": pl.Float64, "ndcg10_original_sd": pl.Float64,
                                      "ndcg10_shuffled": pl.Float64, "ndcg10_shuffled_sd": pl.Float64,
                                      "p": pl.Float64})
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
            row[f"{r['dataset']} ({r['retriever']})"] = (f"{fmt_sd(r['ndcg10_original'], r['ndcg10_original_sd'])} / "
                                                         f"{fmt_sd(r['ndcg10_shuffled'], r['ndcg10_shuffled_sd'])}{mark}")
        row["average"] = f"{fmt(family['ndcg10_original'].mean())} / {fmt(family['ndcg10_shuffled'].mean())}"
        view_rows.append(row)
    view = pl.DataFrame(view_rows).select("model", *[c for c in columns if c in pl.DataFrame(view_rows).columns],
                                          "average")
    notes = ("Cells: nDCG@10 original / shuffled (mean over the shuffle seeds). † shuffled differs from original "
             f"at α = {ALPHA}: two-sided Wilcoxon signed-rank test over queries, pairing each query's original "
             "nDCG@10 with its mean over the shuffles, Holm-corrected over each model's datasets. A model trained "
             "with several seeds is one row: mean ± sd over the seeds, each query averaged over the seeds "
             "before the test. Seeds, queries and shuffle counts per cell are in the CSV.")
    return Table(data, view.fill_null("–"), notes)


def retrievers(metrics: pl.DataFrame, first_stage: pl.DataFrame, training: dict | None = None) -> Table:
    """DebiasFirst Table 2: reranked nDCG@10 (original order) per model and dataset × first-stage retriever,
    with the first-stage run itself as the first row; a model's training seeds as mean ± sd."""
    q = _with_variants(_per_query(metrics).filter((pl.col("debias") == "none") & (pl.col("order") == "original")),
                       training or {})
    per_seed = q.group_by("variant", "model", "dataset", "retriever", maintain_order=True).agg(
        pl.col("value").mean().alias("ndcg10"), pl.len().alias("queries"))
    reranked = per_seed.group_by("variant", "dataset", "retriever", maintain_order=True).agg(
        pl.len().alias("seeds"), pl.col("queries").first(), pl.col("ndcg10").std().alias("ndcg10_sd"),
        pl.col("ndcg10").mean()).rename({"variant": "model"})
    pairs = reranked.select("dataset", "retriever").unique(maintain_order=True)
    base = (_per_query(first_stage).rename({"system": "retriever"})
            .join(pairs, on=["dataset", "retriever"]).group_by("dataset", "retriever", maintain_order=True)
            .agg(pl.col("value").mean().alias("ndcg10"), pl.len().alias("queries"))
            .with_columns(model=pl.lit("first stage"), seeds=pl.lit(1, pl.UInt32), ndcg10_sd=pl.lit(None, pl.Float64)))
    data = pl.concat([base.select(reranked.columns), reranked])
    view = data.with_columns(column=pl.col("dataset") + " · " + pl.col("retriever"),
                             cell=pl.struct("ndcg10", "ndcg10_sd").map_elements(
                                 lambda r: fmt_sd(r["ndcg10"], math.nan if r["ndcg10_sd"] is None else r["ndcg10_sd"]),
                                 return_dtype=pl.String))
    view = view.pivot(on="column", index="model", values="cell").fill_null("–")
    notes = ("nDCG@10 of each model reranking each first-stage run's top candidates in the original order "
             "(mean ± sd over training seeds where a model has several); the first row is the first-stage run "
             "(all judged queries; reranked rows over the queries reranked).")
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
    under shuffled orders and the variance of the position curve, seeds of one entry pooled."""
    runs = {name: run for name, run in training.items() if run["method"] not in POINTWISE_METHODS}
    per_seed = []
    for name, run in runs.items():
        s = summaries.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        c = curves.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        for r in s.iter_rows(named=True):
            values = c.filter((pl.col("dataset") == r["dataset"]) & (pl.col("retriever") == r["retriever"]))
            per_seed.append({"model": variant_of(training, name), "method": run["method"], "aug": run["aug"],
                             "dataset": r["dataset"], "retriever": r["retriever"],
                             "shuffled": r["ndcg10_shuffled_mean"], "shuffle_sd": r["ndcg10_shuffled_sd"],
                             "variance": float(np.var(values["target_ndcg10"].to_numpy())) if values.height
                             else math.nan})
    if not per_seed:
        return Table(pl.DataFrame(), pl.DataFrame({"method": []}), "No training entries with an augmentation are configured.")
    rows = []
    for (model, method, aug, dataset, retriever), g in pl.DataFrame(per_seed).group_by(
            "model", "method", "aug", "dataset", "retriever", maintain_order=True):
        mean, sd = mean_sd(g["shuffled"])
        rows.append({"model": model, "method": method, "aug": aug, "dataset": dataset, "retriever": retriever,
                     "seeds": g.height, "ndcg10_shuffled": mean,
                     "ndcg10_shuffled_sd": sd if g.height > 1 else g["shuffle_sd"][0],
                     "curve_variance": float(g["variance"].mean())})
    data = pl.DataFrame(rows)
    view = data.with_columns(
        cell=pl.struct("ndcg10_shuffled", "ndcg10_shuffled_sd", "curve_variance").map_elements(
            lambda r: f"{fmt_sd(r['ndcg10_shuffled'], r['ndcg10_shuffled_sd'])} (var {fmt(r['curve_variance'], 3)})",
            return_dtype=pl.String),
        column=pl.col("aug") + " · " + pl.col("dataset"))
    view = view.pivot(on="column", index="method", values="cell", aggregate_function="first").fill_null("–")
    notes = ("nDCG@10 under shuffled orders, mean ± sd over training seeds (a single seed: ± sd over the shuffle "
             "seeds) and, in brackets, the variance over input positions of the position curve (nDCG@10 of the "
             "moved relevant passage; mean over seeds); lower variance = less position bias. Seeds per cell in the CSV.")
    return Table(data, view, notes)


def position_bias(summaries: pl.DataFrame, curves: pl.DataFrame, training: dict) -> Table:
    """The default run's story (DebiasFirst Figure 4 and Table 1 in numbers): per model and dataset, the
    spread of the position curve (max − min over the input positions of the moved relevant passage's
    nDCG@10) and nDCG@10 under the original and the shuffled orders, mean ± sd over training seeds."""
    plain = _with_variants(summaries.filter(pl.col("debias") == "none"), training)
    curve = curves.filter(pl.col("debias") == "none")
    rows = []
    for (variant, dataset, retriever), group in plain.group_by("variant", "dataset", "retriever", maintain_order=True):
        spreads, mrr_spreads = [], []
        for model in group["model"]:
            c = curve.filter((pl.col("model") == model) & (pl.col("dataset") == dataset)
                             & (pl.col("retriever") == retriever))
            if c.height:
                spreads.append(c["target_ndcg10"].max() - c["target_ndcg10"].min())
                mrr_spreads.append(c["target_mrr"].max() - c["target_mrr"].min())
        if not spreads:
            continue
        spread, spread_sd = mean_sd(spreads)
        mrr, mrr_sd = mean_sd(mrr_spreads)
        orig, orig_sd = mean_sd(group["ndcg10_original"])
        shuf, shuf_sd = mean_sd(group["ndcg10_shuffled_mean"])
        rows.append({"model": variant, "dataset": dataset, "retriever": retriever, "seeds": group.height,
                     "positions": curve.filter(pl.col("model") == group["model"][0])["position"].n_unique(),
                     "spread": spread, "spread_sd": spread_sd, "spread_mrr": mrr, "spread_mrr_sd": mrr_sd,
                     "ndcg10_original": orig, "ndcg10_original_sd": orig_sd,
                     "ndcg10_shuffled": shuf, "ndcg10_shuffled_sd": shuf_sd})
    data = pl.DataFrame(rows)
    if not data.height:
        return Table(data, pl.DataFrame({"model": []}), "No experiment has position orders.")
    view = pl.DataFrame([{
        "model": r["model"], "dataset": f"{r['dataset']} · {r['retriever']}", "seeds": str(r["seeds"]),
        "curve spread (nDCG@10)": fmt_sd(r["spread"], r["spread_sd"], 3),
        "curve spread (MRR)": fmt_sd(r["spread_mrr"], r["spread_mrr_sd"], 3),
        "nDCG@10 original": fmt_sd(r["ndcg10_original"], r["ndcg10_original_sd"]),
        "nDCG@10 shuffled": fmt_sd(r["ndcg10_shuffled"], r["ndcg10_shuffled_sd"]),
    } for r in data.iter_rows(named=True)])
    notes = ("Curve spread: max − min over the measured input positions of the relevant passage's nDCG@10 (and "
             "MRR) after reranking, the passage moved to each position with the other candidates in first-stage "
             "order; 0 = no position effect. nDCG@10 over all qrels, shuffled = mean over the shuffle seeds. "
             "mean ± sd over training seeds (one value when a model has one seed); positions per row in the CSV.")
    return Table(data, view, notes)


def stability(table: pl.DataFrame, train_seconds: dict[str, float]) -> Table:
    """OC-SFT's quality vs decision stability: per pointwise model (K = 1, the plain model) nDCG@10
    canonical and shuffled, τ-PSI, retention Jaccard, F1 at τ*, training seconds; then every BSC@K row."""
    plain = table.filter(pl.col("k") == 1).sort("dataset", "model")
    data = table.sort("dataset", "model", "k").with_columns(
        train_seconds=pl.col("model").replace_strict(train_seconds, default=None, return_dtype=pl.Float64))
    view = pl.DataFrame([{
        "model": r["model"], "dataset": f"{r['dataset']} · {r['retriever']}", "K": str(r["k"]),
        "queries": str(r["queries"]), "nDCG@10 canonical": fmt(r["ndcg10_canonical"]),
        "nDCG@10 shuffled": fmt(r["ndcg10"]), "τ-PSI (M)": f"{fmt(r['tau_psi'])} ({r['presentations']})",
        "retention Jaccard": fmt(r["jaccard"]), "F1 at τ*": fmt(r["f1"]), "τ*": fmt(r["threshold"], 3),
        "calls/query": fmt(r["calls_per_query"], 1),
        "training s": fmt(train_seconds[r["model"]], 0) if r["model"] in train_seconds else "–",
    } for r in pl.concat([plain, table.filter(pl.col("k") > 1).sort("dataset", "model", "k")]).iter_rows(named=True)])
    notes = ("K = 1 rows are the plain scorers; K > 1 rows are BSC@K (scores averaged over K shuffles, then "
             "sorted; its presentations are disjoint groups of K shuffles). τ-PSI: (1 − mean pairwise Kendall τ)/2 "
             "over M presentations (lower = more stable); retention Jaccard: mean pairwise Jaccard of the sets "
             "scoring at least τ*, the threshold with the best mean canonical set-F1 (higher = more stable). "
             "Training seconds from the train rule's benchmark.")
    return Table(data, view, notes)


TABLES = {
    # name: (title, builder inputs)
    "original_vs_shuffled": "nDCG@10 under the original and shuffled input orders (DebiasFirst Table 1)",
    "retrievers": "Reranking different first-stage runs (DebiasFirst Table 2)",
    "capcal": "Content-agnostic calibration: quality and cost (CapCal)",
    "ablations": "Objective × augmentation ablations (DebiasFirst Table 3)",
    "position_bias": "Position effect and its removal: curve spread and shuffled-order quality (DebiasFirst Figure 4)",
}


def build(name: str, metrics: pl.DataFrame, summaries: pl.DataFrame, curves: pl.DataFrame,
          first_stage: pl.DataFrame, training: dict) -> Table:
    """The table ``name`` (a key of :data:`TABLES`) from the concatenated reranking results."""
    if name == "original_vs_shuffled":
        return original_vs_shuffled(metrics, training)
    if name == "retrievers":
        return retrievers(metrics, first_stage, training)
    if name == "capcal":
        return capcal(metrics, summaries)
    if name == "ablations":
        return ablations(summaries, curves, training)
    if name == "position_bias":
        return position_bias(summaries, curves, training)
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


# Figures: the same inputs as the tables, drawn with matplotlib; each is written as PNG and PDF.

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _integer_x(axes) -> None:
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def seed_curves(curves: pl.DataFrame, training: dict, debias: str = "none") -> pl.DataFrame:
    """Position curves averaged over each variant's seeds: mean and sd (over seeds) per position."""
    c = _with_variants(curves.filter(pl.col("debias") == debias), training)
    return (c.group_by("variant", "dataset", "retriever", "position")
            .agg(pl.len().alias("seeds"),
                 *[pl.col(m).mean().alias(m) for m in ("target_ndcg10", "target_mrr")],
                 *[pl.col(m).std().fill_null(0.0).alias(f"{m}_sd") for m in ("target_ndcg10", "target_mrr")])
            .sort("variant", "dataset", "retriever", "position"))


def position_curve_figure(curves: pl.DataFrame, training: dict, path: str | Path) -> None:
    """DebiasFirst Figure 4: nDCG@10 and MRR of the moved relevant passage against its input position,
    one line per model (mean over training seeds, band: ± sd over seeds)."""
    from posbias.report import save_figure

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    agg = seed_curves(curves, training)
    for (variant, dataset, retriever), g in agg.group_by("variant", "dataset", "retriever", maintain_order=True):
        label = f"{variant} · {dataset} · {retriever}" + (f" ({g['seeds'].max()} seeds)" if g["seeds"].max() > 1 else "")
        for ax, m in zip(axes, ("target_ndcg10", "target_mrr")):
            line, = ax.plot(g["position"], g[m], marker="o", ms=3, label=label)
            ax.fill_between(g["position"], (g[m] - g[f"{m}_sd"]).to_numpy(), (g[m] + g[f"{m}_sd"]).to_numpy(),
                            color=line.get_color(), alpha=0.15)
    for ax, what in zip(axes, ("nDCG@10", "MRR")):
        ax.set(xlabel="input position of the relevant passage", ylabel=f"{what} of that passage", ylim=(0, 1.02),
               title=f"Position curve ({what})")
        ax.grid(alpha=0.3)
    _integer_x(axes)
    axes[0].legend(fontsize=7, loc="lower left")
    save_figure(fig, path, 120)


def _permsc_k(debias: str) -> int | None:
    return 1 if debias == "none" else int(debias.split("@")[1]) if debias.startswith("permsc@") else None


def inference_vs_training_figure(metrics: pl.DataFrame, training: dict, path: str | Path) -> pl.DataFrame:
    """DebiasFirst Figure 5: nDCG@10 per shuffle seed of every model with and without PermSC (left), and
    nDCG@10 under shuffled orders against PermSC's number of permutations K (K = 1: no PermSC; right),
    the peak marked. Means over queries and training seeds. Returns the plotted numbers."""
    from posbias.report import save_figure

    q = _with_variants(_per_query(metrics).filter(pl.col("order").str.starts_with("shuffled-")), training)
    q = q.with_columns(k=pl.col("debias").map_elements(_permsc_k, return_dtype=pl.Int64)).drop_nulls("k")
    per_seed = (q.with_columns(shuffle=pl.col("order").str.split("-").list.get(1).cast(pl.Int64))
                .group_by("variant", "dataset", "retriever", "debias", "k", "shuffle").agg(pl.col("value").mean())
                .sort("variant", "dataset", "retriever", "k", "shuffle"))
    by_k = (per_seed.group_by("variant", "dataset", "retriever", "k").agg(pl.col("value").mean())
            .sort("variant", "dataset", "retriever", "k"))
    has_permsc = by_k.group_by("variant", "dataset", "retriever").agg(pl.col("k").max() > 1).filter(pl.col("k"))
    per_seed = per_seed.join(has_permsc.drop("k"), on=["variant", "dataset", "retriever"])
    by_k = by_k.join(has_permsc.drop("k"), on=["variant", "dataset", "retriever"])
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), constrained_layout=True)
    for (variant, dataset, retriever, debias), g in per_seed.group_by("variant", "dataset", "retriever", "debias",
                                                                        maintain_order=True):
        axes[0].plot(g["shuffle"], g["value"], marker="o", ms=3, ls="-" if debias == "none" else "--",
                     label=f"{variant} · {dataset}" + ("" if debias == "none" else f" + {debias}"))
    for (variant, dataset, retriever), g in by_k.group_by("variant", "dataset", "retriever", maintain_order=True):
        line, = axes[1].plot(g["k"], g["value"], marker="o", ms=3, label=f"{variant} · {dataset}")
        peak = g.sort("value", descending=True).row(0, named=True)
        axes[1].scatter([peak["k"]], [peak["value"]], s=80, facecolors="none", edgecolors=line.get_color())
    axes[0].set(xlabel="shuffle seed", ylabel="nDCG@10", title="Per shuffle seed: training- vs inference-time debiasing")
    axes[1].set(xlabel="PermSC permutations K (1 = none)", ylabel="nDCG@10, shuffled orders",
                title="PermSC against K (circle: peak)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _integer_x(axes)
    save_figure(fig, path, 120)
    return by_k


def ablation_curves_figure(curves: pl.DataFrame, training: dict, path: str | Path) -> None:
    """DebiasFirst Figure 6: position curves of the trained listwise models, one panel per augmentation,
    one line per objective (mean over seeds), the variance across positions in the legend."""
    from posbias.report import save_figure

    plt = _plt()
    agg = seed_curves(curves, training)
    runs = {variant_of(training, name): run for name, run in training.items() if run["method"] not in POINTWISE_METHODS}
    augs = sorted({run["aug"] for run in runs.values()}) or ["noaug"]
    fig, axes = plt.subplots(1, len(augs), figsize=(5 * len(augs), 4), constrained_layout=True, squeeze=False)
    for ax, aug in zip(axes[0], augs):
        for variant, run in runs.items():
            g = agg.filter((pl.col("variant") == variant) & (run["aug"] == aug))
            for (dataset, retriever), gg in g.group_by("dataset", "retriever", maintain_order=True):
                variance = float(np.var(gg["target_ndcg10"].to_numpy()))
                ax.plot(gg["position"], gg["target_ndcg10"], marker="o", ms=3,
                        label=f"{run['method']} ({variant}, {dataset}): var {variance:.3f}")
        ax.set(xlabel="input position of the relevant passage", ylabel="nDCG@10 of that passage", ylim=(0, 1.02),
               title=aug)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    _integer_x(axes[0])
    save_figure(fig, path, 120)


FIGURES = {
    "position_curve": "Position curve: the relevant passage moved to each input position (DebiasFirst Figure 4)",
    "inference_vs_training": "Training- vs inference-time debiasing per shuffle seed, PermSC against K (DebiasFirst Figure 5)",
    "ablation_curves": "Position curves of the objective × augmentation ablations (DebiasFirst Figure 6)",
}


def draw(name: str, metrics: pl.DataFrame, curves: pl.DataFrame, training: dict, path: str | Path) -> None:
    """The figure ``name`` (a key of :data:`FIGURES`), written to ``path`` (PNG) and its PDF sibling."""
    if name == "position_curve":
        position_curve_figure(curves, training, path)
    elif name == "inference_vs_training":
        inference_vs_training_figure(metrics, training, path)
    elif name == "ablation_curves":
        ablation_curves_figure(curves, training, path)
    else:
        raise ValueError(f"unknown paper figure {name!r}; use one of {sorted(FIGURES)}")
