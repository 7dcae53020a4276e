"""OC-SFT's label-budget curve (its Figure 7): the student's stability against the teacher labels it cost.

The paper: "1K 标注的稳定性超过 30K 标签的 order-averaged 蒸馏" (OC-SFT on 1K labelled queries is stabler
than order-averaged distillation on 30K, whose labels each took T = 10 teacher passes). Here a comparison is one
group of :func:`posbias.config.label_budget`: a run on the labels of only its first ``max_queries`` queries, its
recipe on every labelled query, and the order-averaged runs from the same base, training set and teacher. Per
variant: the labelled queries it trained on (its budget, at most the silver job's queries), the teacher views
each took (1 + T for labels over T shuffles, 1 otherwise; the anchor view is labelled in both), their product
(the label cost, in query-views), and the student's K = 1 nDCG@10, τ-PSI and retention Jaccard (mean and sd
over seeds and test datasets).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias import methods
from posbias.debias.adaptive import FIXED
from posbias.paper.seeds import named_variants, on_shared_datasets
from posbias.paper.stats import mean_sd
from posbias.paper.writers import Table, fmt_sd, panels_by_group, save_figure, view_or_none

GROUP = ("data", "base", "teacher")
METRICS = (("ndcg10", "nDCG@10"), ("tau_psi", "τ-PSI"), ("jaccard", "retention Jaccard"))


def budget_rows(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict], variants: dict[str, str],
                dev: str | None = None) -> pl.DataFrame:
    """One row per variant of ``study``, in order of group and label cost: labelled queries, teacher views per
    query window, label cost and the student's K = 1 metrics (NaN where not measured)."""
    plain = named_variants(stability.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED)
                                            & (pl.col("debias") == "none") & (pl.col("dataset") != (dev or ""))),
                           variants)
    plain = on_shared_datasets(plain, study, GROUP)
    rows = []
    for s in study:
        job = silver_stats.filter((pl.col("dataset") == s["data"]) & (pl.col("teacher") == s["teacher"])
                                  & (pl.col("shuffles") == s["shuffles"]))
        labelled = int(job["queries"][0]) if job.height and job["queries"][0] is not None else None
        known = [x for x in (labelled, s["max_queries"]) if x is not None]
        queries = min(known) if known else None
        own = plain.filter((pl.col("variant") == s["variant"])
                           & (pl.col("group_key") == " · ".join(str(s[k]) for k in GROUP)))
        row = {k: s[k] for k in (*GROUP, "variant", "method")} | {
            "label": methods.get(s["method"]).label, "seeds": own["model"].n_unique(),
            "datasets": own["shared"][0] if own.height else "",
            "queries": queries, "views": 1 + s["shuffles"],
            "label_cost": queries * (1 + s["shuffles"]) if queries is not None else None}
        for column, _ in METRICS:
            row[column], row[f"{column}_sd"] = mean_sd(own[column].to_list())
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows).sort(*GROUP, "label_cost", "variant", maintain_order=True)


def label_budget(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict], variants: dict[str, str],
                 dev: str | None = None) -> Table:
    """The label-budget table: every variant of each group at its label cost, with its quality and stability."""
    rows = budget_rows(stability, silver_stats, study, variants, dev)
    view = [{"training set · base · teacher": " · ".join(str(r[k]) for k in GROUP), "student": r["variant"],
             "method": r["label"], "test datasets": r["datasets"], "labelled queries": str(r["queries"]), "teacher views": str(r["views"]),
             "label cost": str(r["label_cost"]), "seeds": str(r["seeds"]),
             **{label: fmt_sd(r[c], r[f"{c}_sd"], 3) for c, label in METRICS}}
            for r in rows.iter_rows(named=True)]
    notes = ("OC-SFT's label-budget curve (its Figure 7). Labelled queries: the training queries whose silver labels "
             "the student trained on (training.<name>.max_queries, the first N by query id, else every labelled "
             "query). Teacher views: teacher passes per labelled query window (1 + T for labels over T shuffles, "
             "as order-averaged targets and pointwise DebiasFirst's propensity need). Label cost: their product. "
             "nDCG@10 (shuffled presentations), τ-PSI and retention Jaccard: K = 1, mean ± sd over seeds and the "
             "test datasets every variant of the group was measured on (test datasets), so no budget is averaged "
             "over other collections than another. The paper's claim: OC-SFT on 1K labelled queries is stabler than order-averaged "
             "distillation on 30K × 10 views.")
    return Table(rows, view_or_none(view, "label budgets", "none: no pointwise run sets training.<name>.max_queries "
                                                           "(posbias.config.label_budget)"), notes)


def label_budget_figure(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict],
                        variants: dict[str, str], dev: str | None, path: str | Path) -> None:
    """Per group, retention Jaccard and τ-PSI against the label cost (log scale): one point per variant,
    a method's budgets joined by a line."""
    rows = budget_rows(stability, silver_stats, study, variants, dev)
    fig, groups = panels_by_group(rows.filter(pl.col("label_cost").is_not_null()) if rows.height else rows, GROUP)
    for key, part, pair in groups:
        for ax, (column, label) in zip(pair, METRICS[2:0:-1]):
            for (method,), line in part.group_by("label", maintain_order=True):
                ax.plot(line["label_cost"], line[column], marker="o", ms=4, label=method)
                for r in line.iter_rows(named=True):
                    ax.annotate(f"{r['queries']}", (r["label_cost"], r[column]), fontsize=7, xytext=(3, 3),
                                textcoords="offset points")
            ax.set(xscale="log", xlabel="label cost (labelled queries × teacher views)", ylabel=label,
                   title=" · ".join(map(str, key)))
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    save_figure(fig, path, 120)
