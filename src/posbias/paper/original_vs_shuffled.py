"""DebiasFirst Table 1: nDCG@10 under the original and the shuffled orders, with paired tests."""

from __future__ import annotations

import math

import polars as pl

from posbias import orders
from posbias.paper.seeds import per_query, with_variants
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.paper.writers import Table, fmt, fmt_sd


def original_vs_shuffled(metrics: pl.DataFrame, training: dict | None = None) -> Table:
    """DebiasFirst Table 1: nDCG@10 per model × dataset under the original order and shuffled orders.

    ``metrics``: RERANK_METRICS of the plain models (debias ``none``). Shuffled = mean over the shuffle
    seeds. A model trained with several seeds (``training.<name>.seeds``) is one row: cells are
    mean ± sd over its seeds, and each query's value is averaged over the seeds before the test.
    The test pairs each query's original nDCG@10 with its mean over the shuffles; family: one
    model's datasets (Holm).
    """
    q = with_variants(per_query(metrics).filter(pl.col("debias") == "none"), training or {})
    rows = []
    for (variant, dataset, retriever), group in q.group_by("variant", "dataset", "retriever", maintain_order=True):
        shuffled = pl.col("order").str.starts_with(orders.prefix("shuffled"))
        per_model = group.group_by("model", "query_id", maintain_order=True).agg(
            orig=pl.col("value").filter(pl.col("order") == orders.ORIGINAL).mean(),
            shuf=pl.col("value").filter(shuffled).mean())
        by_model = per_model.group_by("model", maintain_order=True).agg(pl.col("orig").mean(), pl.col("shuf").mean())
        paired = (per_model.group_by("query_id", maintain_order=True)
                  .agg(pl.col("orig").mean(), pl.col("shuf").mean()).drop_nulls())
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
