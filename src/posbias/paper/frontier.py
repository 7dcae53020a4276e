"""Every method on one stability × cost frontier (beyond the papers; the OC-SFT paper's Figure 8 is its
quality–stability half for its own systems).

Each paper compares its methods inside its own table: DebiasFirst's trained listwise models, OC-SFT's
trained pointwise scorers, and the inference-time methods (PermSC@K, CapCal, BSC@K, round-robin, marker
renaming) each against its own baselines. Here every (model, method) a config measures stability for
(the stability stage's rows: ``posbias.stability``) sits on the same queries and presentations of a
dataset, with its quality (nDCG@10 over the shuffled presentations), its stability (τ-PSI, retention
Jaccard, and a consumer's flip rates where the dataset has one), and what it costs (model calls and
prompt tokens per query, from the rerank jobs' cost files; an adaptive budget's are the draws it made).
Two Pareto fronts are marked per dataset: stability × cost (fewer calls, lower τ-PSI) and quality ×
stability (higher nDCG@10, lower τ-PSI); each row is tested against a reference scorer.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from posbias.debias import AGGREGATE_LISTS, AVERAGE_SCORES, shuffle_combine
from posbias.debias.adaptive import ADAPTIVE, FIXED, label
from posbias.paper.seeds import named_variants, shown
from posbias.paper.stats import ALPHA, holm_by_metric, mean_sd, paired_against, significant
from posbias.paper.writers import Table, fmt, fmt_sd, line_styles, min_y_span, panels_with_legend, save_figure

TESTED = ("ndcg10", "tau_psi", "jaccard")  # paired over queries against the reference
FLIPS = ("flip", "verdict_flip")  # a consumer's flip rates (posbias.consumers), where the dataset has one
ROW_KEYS = ("dataset", "retriever", "family", "variant", "method", "k", "budget")


def method_label(family: str, debias: str, k: int, budget: str = FIXED) -> str:
    """How a row's method prints: the debiasing method at K = 1 (``none``: the plain model), BSC@K
    (pointwise) or PermSC@K (listwise) above, ``…@≤K adaptive`` for an adaptive budget capped at K."""
    return label(shuffle_combine(family), k, budget) if k > 1 else debias


def pareto(points: list[tuple[float, ...]], senses: tuple[str, ...]) -> list[bool]:
    """Which points are on the Pareto front: no other point is at least as good in every coordinate and
    better in one. ``senses`` gives each coordinate's direction (``min`` or ``max``); a point with a NaN
    coordinate is never on the front and dominates none."""
    signed = [tuple(v if s == "min" else -v for v, s in zip(p, senses)) for p in points]
    valid = [not any(math.isnan(v) for v in p) for p in signed]

    def dominates(a: tuple, b: tuple) -> bool:
        return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))

    return [ok and not any(other_ok and dominates(other, p) for other, other_ok in zip(signed, valid))
            for p, ok in zip(signed, valid)]


def _per_query(per_query: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    """Per dataset, each (model, method) row's per-query values on the queries every row of that dataset
    scored (rows with fewer than two presentations have no stability and are left out)."""
    q = named_variants(per_query.filter(pl.col("tau_psi").is_not_nan()), variants)
    parts = []
    for _, part in q.group_by("dataset", "retriever", maintain_order=True):
        ids = part.group_by("model", "debias", "k", "budget", maintain_order=True).agg(pl.col("query_id"))["query_id"]
        common = sorted(set.intersection(*(set(i) for i in ids.to_list())))
        parts.append(part.filter(pl.col("query_id").is_in(common)))
    q = pl.concat(parts) if parts else q
    return q.with_columns(method=pl.struct("family", "debias", "k", "budget").map_elements(
        lambda r: method_label(r["family"], r["debias"], r["k"], r["budget"]), return_dtype=pl.String))


def _costs(stability: pl.DataFrame) -> pl.DataFrame:
    """One presentation's calls and tokens per query and draw of each model's row (its cost per draw)."""
    return stability.select("model", "dataset", "retriever", "debias", "k", "budget",
                            call=pl.col("calls_per_query") / pl.col("draws"),
                            token=pl.col("tokens_per_query") / pl.col("draws"))


def _flips(decisions: pl.DataFrame | None) -> pl.DataFrame:
    """A consumer's per-query flip rates, keyed as the plain model's (K = 1, fixed) stability rows."""
    keys = {"model": pl.String, "dataset": pl.String, "retriever": pl.String, "query_id": pl.String}
    frame = (pl.DataFrame(schema={**keys, **dict.fromkeys(FLIPS, pl.Float64)})
             if decisions is None or decisions.is_empty() else decisions.select(*keys, *FLIPS))
    return frame.with_columns(debias=pl.lit("none"), k=pl.lit(1, pl.Int32), budget=pl.lit(FIXED))


def frontier_rows(per_query: pl.DataFrame, stability: pl.DataFrame, variants: dict[str, str],
                  decisions: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (dataset, retriever, family, variant, method, K, budget): means over the dataset's
    common queries, then mean ± sd over the variant's seeds, of TESTED and the shift from the plain
    model; calls, tokens and draws per query; the consumer's flip rates for a plain model on a consumer
    dataset (NaN elsewhere); and the two fronts (``cost_front``: calls ↓ × τ-PSI ↓; ``quality_front``:
    nDCG@10 ↑ × τ-PSI ↓)."""
    q = _per_query(per_query, variants)
    q = q.join(_flips(decisions), on=["model", "dataset", "retriever", "debias", "k", "budget", "query_id"],
               how="left")
    per_model = (q.group_by("model", "debias", *ROW_KEYS, maintain_order=True)
                 .agg(pl.col(*TESTED, "plain_shift", "draws", *FLIPS).mean())
                 .join(_costs(stability), on=["model", "dataset", "retriever", "debias", "k", "budget"], how="left",
                       nulls_equal=True)
                 .with_columns(calls=pl.col("draws") * pl.col("call"), tokens=pl.col("draws") * pl.col("token")))
    rows = []
    for key, seeds in per_model.group_by(*ROW_KEYS, maintain_order=True):
        row = dict(zip(ROW_KEYS, key)) | {"seeds": seeds.height, "queries": 0}
        for column in (*TESTED, "plain_shift"):
            row[column], row[f"{column}_sd"] = mean_sd(seeds[column].fill_null(math.nan).to_list())
        for column in ("draws", "calls", "tokens", *FLIPS):
            row[column] = float(seeds[column].fill_null(math.nan).mean())
        rows.append(row)
    if not rows:
        return pl.DataFrame(schema={k: pl.String for k in ROW_KEYS})
    counts = q.group_by("dataset", "retriever", maintain_order=True).agg(queries=pl.col("query_id").n_unique())
    data = pl.DataFrame(rows).drop("queries").join(counts, on=["dataset", "retriever"], how="left")
    fronts = []
    for _, part in data.group_by("dataset", "retriever", maintain_order=True):
        fronts.append(part.with_columns(
            cost_front=pl.Series(pareto(list(zip(part["calls"], part["tau_psi"])), ("min", "min"))),
            quality_front=pl.Series(pareto(list(zip(part["ndcg10"], part["tau_psi"])), ("max", "min")))))
    return pl.concat(fronts).sort("dataset", "retriever", "calls", "family", "variant", "method")


def frontier_tests(per_query: pl.DataFrame, variants: dict[str, str], references: list[str]) -> pl.DataFrame:
    """Per dataset, every row against the reference (the first of ``references`` scored there, plain,
    K = 1): per-query values averaged over seeds, a paired two-sided Wilcoxon test over the common
    queries, Holm-corrected over all comparisons of one metric."""
    q = _per_query(per_query, variants).with_columns(row=pl.concat_str("variant", "method", "budget", separator="|"))
    tests = []
    for (dataset, retriever), part in q.group_by("dataset", "retriever", maintain_order=True):
        reference = next((r for r in references if r in part["variant"].to_list()), None)
        if reference is None:
            continue
        means = part.group_by("row", "query_id", maintain_order=True).agg(pl.col(*TESTED).mean())
        ref_row = f"{reference}|none|{FIXED}"
        tests.append(paired_against(means, "row", ref_row, TESTED).with_columns(
            dataset=pl.lit(dataset), retriever=pl.lit(retriever), reference=pl.lit(reference)))
    if not tests:
        return pl.DataFrame(schema={"row": pl.String, "metric": pl.String, "p": pl.Float64, "p_holm": pl.Float64,
                                    "dataset": pl.String, "retriever": pl.String, "reference": pl.String})
    return holm_by_metric(pl.concat(tests))


def frontier(per_query: pl.DataFrame, stability: pl.DataFrame, variants: dict[str, str], references: list[str],
             decisions: pl.DataFrame | None = None, settings: dict[str, dict] | None = None) -> Table:
    """The frontier table: per dataset, every (model, method) a config measures stability for, cheapest
    first, with quality, stability, flips, cost and the two fronts; † marks a difference from the
    reference significant after Holm's correction."""
    data = frontier_rows(per_query, stability, variants, decisions)
    tests = frontier_tests(per_query, variants, references)
    marked = significant(tests, ("dataset", "retriever", "row", "metric"))
    refs = dict(((r["dataset"], r["retriever"]), r["reference"]) for r in tests.iter_rows(named=True))
    view = []
    for r in data.iter_rows(named=True) if "calls" in data.columns else []:
        row_key = f"{r['variant']}|{r['method']}|{r['budget']}"

        def cell(column: str, r=r, row_key=row_key) -> str:
            mark = "†" if (r["dataset"], r["retriever"], row_key, column) in marked else ""
            return fmt_sd(r[column], r[f"{column}_sd"], 3) + mark

        reference = refs.get((r["dataset"], r["retriever"]))
        view.append({
            "dataset": f"{r['dataset']} · {r['retriever']}", "family": r["family"],
            "model": shown(r["variant"], settings or {})
                     + (" (ref.)" if r["variant"] == reference and r["method"] == "none" else ""),
            "method": r["method"], "seeds": str(r["seeds"]), "queries": str(r["queries"]),
            "calls/query": fmt(r["calls"], 1), "tokens/query": fmt(r["tokens"], 0),
            "nDCG@10 shuffled": cell("ndcg10"), "τ-PSI": cell("tau_psi"), "retention Jaccard": cell("jaccard"),
            "flip": fmt(r["flip"], 3), "verdict flip": fmt(r["verdict_flip"], 3),
            "shift from plain": cell("plain_shift") if not math.isnan(r["plain_shift"]) else "–",
            "front": " ".join(mark for mark, on in (("cost", r["cost_front"]), ("quality", r["quality_front"])) if on)
                     or "–",
        })
    if tests.height:
        pivot = tests.pivot("metric", index=["dataset", "retriever", "row"], values="p_holm")
        data = data.with_columns(row=pl.concat_str("variant", "method", "budget", separator="|")).join(
            pivot.rename({m: f"p_holm_{m}" for m in TESTED if m in pivot.columns}),
            on=["dataset", "retriever", "row"], how="left").drop("row")
    notes = ("Every (model, method) with shuffled presentations, per dataset on the queries all its rows scored, "
             "cheapest first. method: none (the plain model) or an inference-time method at K = 1 (capcal, "
             f"roundrobin@R, rename@K, …); {AGGREGATE_LISTS}@K / {AVERAGE_SCORES}@K aggregate K reranked shuffles "
             "(a listwise model's lists / a pointwise scorer's scores); '@≤K adaptive' draws those shuffles one at a "
             "time until the aggregate's top set settles (posbias.debias.adaptive). calls/query and tokens/query: "
             "model calls and prompt tokens per query (the rerank jobs' cost files × the draws). τ-PSI: (1 − mean "
             "pairwise Kendall τ)/2 (lower = more stable); retention Jaccard: mean pairwise Jaccard of the retained "
             "sets (higher = more stable); flip / verdict flip: the consumer's decision flips across presentations "
             "(a plain model on a QA or response-ranking dataset); shift from plain: (1 − Kendall τ)/2 between a "
             "method's ranking and the plain model's of the same presentation (rename@1: the marker-renaming "
             "sensitivity). front: on the Pareto front of calls ↓ × τ-PSI ↓ "
             "(cost) and of nDCG@10 ↑ × τ-PSI ↓ (quality). (ref.): the dataset's reference (the first of "
             f"frontier.references scored there); †: differs from it in a paired two-sided Wilcoxon test over "
             f"queries (per-query values averaged over seeds), Holm-corrected over the table's comparisons of that "
             f"metric, p < {ALPHA}. Means ± sd over seeds.")
    return Table(data, pl.DataFrame(view), notes)


def frontier_figure(per_query: pl.DataFrame, stability: pl.DataFrame, variants: dict[str, str],
                    decisions: pl.DataFrame | None, path: str | Path) -> None:
    """One row of panels per dataset: τ-PSI against model calls per query (log scale), the stability ×
    cost front drawn as a staircase; and τ-PSI against nDCG@10, the quality × stability front drawn.
    Circles: listwise, squares: pointwise; open markers: adaptive budgets. Each point carries a number, and the
    legend beside the row names it (variant · method), so no label covers another; one colour-blind-safe colour
    per variant."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    data = frontier_rows(per_query, stability, variants, decisions)
    cells = data.select("dataset", "retriever").unique(maintain_order=True).rows() if "calls" in data.columns else []
    parts = [data.filter((pl.col("dataset") == d) & (pl.col("retriever") == r)) for d, r in cells]
    # the numbered legend gets its own column, as wide as its longest row needs, so the panels keep their width
    columns = max((1 + part.height // 24 for part in parts), default=1)
    fig, axes, legends = panels_with_legend(max(len(cells), 1), 2, columns, (5, 4.2))
    for (dataset, retriever), part, (cost_ax, quality_ax), legend_ax in zip(cells, parts, axes, legends):
        names = part["variant"].unique(maintain_order=True).to_list()
        colours = {v: look["color"] for v, look in zip(names, line_styles(len(names)))}
        handles = []
        for number, r in enumerate(part.iter_rows(named=True), start=1):
            colour = colours[r["variant"]]
            marker = "o" if r["family"] == "listwise" else "s"
            face = "none" if r["budget"] == ADAPTIVE else colour
            for ax, x in ((cost_ax, r["calls"]), (quality_ax, r["ndcg10"])):
                ax.scatter([x], [r["tau_psi"]], marker=marker, s=30, edgecolors=colour, facecolors=face)
                ax.annotate(str(number), (x, r["tau_psi"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
            handles.append(Line2D([], [], ls="", marker=marker, markeredgecolor=colour, markerfacecolor=face,
                                  label=f"{number}  {r['variant']} · {r['method']}"))
        for ax, column, front in ((cost_ax, "calls", "cost_front"), (quality_ax, "ndcg10", "quality_front")):
            on = part.filter(pl.col(front)).sort(column)
            ax.step(on[column], on["tau_psi"], where="post" if column == "calls" else "pre", color="k", lw=1,
                    alpha=0.6)
            ax.grid(alpha=0.3)
        cost_ax.set(xscale="log", xlabel="model calls per query", ylabel="τ-PSI (lower = more stable)",
                    title=f"{dataset} · {retriever}\nstability × cost")
        # ticks at the fixed budgets measured (whole calls per query), not the log axis's 2×10⁰ … labels
        measured = sorted({float(c) for c in part["calls"] if c is not None and c == c and float(c).is_integer()})
        if 0 < len(measured) <= 8:
            cost_ax.set_xticks(measured, [f"{c:g}" for c in measured])
            cost_ax.xaxis.set_minor_formatter(NullFormatter())
        quality_ax.set(xlabel="nDCG@10 over shuffled presentations", ylabel="τ-PSI",
                       title=f"{dataset} · {retriever}\nquality × stability")
        for ax in (cost_ax, quality_ax):
            min_y_span(ax)  # two rows 0.0004 apart in τ-PSI must not fill the panel
        legend_ax.legend(handles=handles, fontsize=6, loc="upper left", frameon=False, ncol=1 + len(handles) // 24)
    save_figure(fig, path, 120)
