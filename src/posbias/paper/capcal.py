"""CapCal: quality without and with calibration, against PermSC, and the cost of each."""

from __future__ import annotations

import math

import polars as pl

from posbias import debias, orders
from posbias.paper.seeds import per_query
from posbias.paper.stats import ALPHA, holm, paired_pvalue
from posbias.paper.writers import Table, fmt, fmt_sd

COMPARED = ("capcal", "permsc")  # CapCal (each placeholder variant) and its comparison, PermSC@K
ALPHA_COLUMNS = ("capcal_alpha_mean", "capcal_alpha_sd", "capcal_at_cap")  # α over the method's calibration steps


def capcal(metrics: pl.DataFrame, summaries: pl.DataFrame) -> Table:
    """CapCal: nDCG@10 without and with each calibration variant (and each PermSC@K the experiment
    runs, the papers' comparison) per model × dataset, original and shuffled orders, with the cost per
    query; paired test none vs the method on the original order, Holm over all rows. Experiments
    without a CapCal method are left out."""
    q = per_query(metrics)
    rows = []
    for (model, dataset, retriever), group in q.group_by("model", "dataset", "retriever", maintain_order=True):
        methods = sorted(d for d in group["debias"].unique() if debias.parse(d).method in COMPARED)
        if "none" not in set(group["debias"]) or not any(debias.parse(d).method == "capcal" for d in methods):
            continue
        orig = group.filter(pl.col("order") == orders.ORIGINAL).pivot(on="debias", index="query_id", values="value")
        shuf = (group.filter(pl.col("order").str.starts_with(orders.prefix("shuffled")))
                .group_by("debias", maintain_order=True).agg(pl.col("value").mean()))
        shuf = dict(shuf.iter_rows())
        cost = summaries.filter((pl.col("model") == model) & (pl.col("dataset") == dataset)
                                & (pl.col("retriever") == retriever))
        cost = {r["debias"]: r for r in cost.iter_rows(named=True)}
        for method in methods:
            rows.append({"model": model, "dataset": dataset, "retriever": retriever, "method": method,
                         "queries": orig.height, "ndcg10_original": orig["none"].mean(),
                         "ndcg10_original_method": orig[method].mean(),
                         "ndcg10_shuffled": shuf.get("none", math.nan),
                         "ndcg10_shuffled_method": shuf.get(method, math.nan),
                         "calls_per_query": cost.get("none", {}).get("calls_per_query", math.nan),
                         "calls_per_query_method": cost.get(method, {}).get("calls_per_query", math.nan),
                         "seconds_per_query": cost.get("none", {}).get("seconds_per_query", math.nan),
                         "seconds_per_query_method": cost.get(method, {}).get("seconds_per_query", math.nan),
                         **{key: cost.get(method, {}).get(key, math.nan) for key in ALPHA_COLUMNS},
                         "p": paired_pvalue(orig["none"].to_numpy(), orig[method].to_numpy())})
    data = pl.DataFrame(rows)
    if data.height:
        data = data.with_columns(p_holm=pl.Series(holm(data["p"].to_list())))
    view = pl.DataFrame([{
        "model": r["model"], "dataset": f"{r['dataset']} · {r['retriever']}", "method": r["method"],
        "original": fmt(r["ndcg10_original"]),
        "+ method": fmt(r["ndcg10_original_method"]) + ("†" if r["p_holm"] < ALPHA else ""),
        "shuffled": fmt(r["ndcg10_shuffled"]), "shuffled + method": fmt(r["ndcg10_shuffled_method"]),
        "calls/query": f"{fmt(r['calls_per_query'], 1)} → {fmt(r['calls_per_query_method'], 1)}",
        "s/query": f"{fmt(r['seconds_per_query'], 3)} → {fmt(r['seconds_per_query_method'], 3)}",
        "α": fmt_sd(r["capcal_alpha_mean"], r["capcal_alpha_sd"], 3), "α at cap": fmt(r["capcal_at_cap"], 3),
    } for r in data.iter_rows(named=True)]) if data.height else pl.DataFrame({"model": []})
    labels = "; ".join(f"{m}: {debias.parse(m).label}" for m in sorted(set(data["method"]))) if data.height else ""
    notes = ("nDCG@10 without and with CapCal (content-agnostic calibration) in each configured variant (placeholder, its length, α), and "
             "PermSC@K where the experiment runs it (the papers' comparison; PermSC aggregates whole reranked "
             f"lists, so it has no shuffled column). {labels}. † differs from the uncalibrated original-order run at "
             f"α = {ALPHA}: two-sided Wilcoxon signed-rank test over queries, Holm-corrected over all rows. Cost: "
             "model calls and seconds per query, without → with the method (CapCal's content-free prior is "
             "computed once per query and window size; PermSC@K counts its K reranking passes). α: CapCal's "
             "coefficient over its calibration steps (mean ± sd, all orders), and the share of steps where the "
             "entropy-adaptive α = min(c·H/ln|C|, α_max) sat at its cap (– for a fixed α).")
    return Table(data, view, notes)
