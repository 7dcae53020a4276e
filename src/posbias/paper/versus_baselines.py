"""DebiasFirst Table 1's significance: the reference model against each baseline, per dataset."""

from __future__ import annotations

import math

import polars as pl

from posbias import orders
from posbias.paper.seeds import per_query, with_variants
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.paper.writers import Table, fmt_sd


def versus_baselines(metrics: pl.DataFrame, training: dict, reference: str | None) -> Table:
    """nDCG@10 of every model (variant) per dataset × retriever under the original order and the mean over
    the shuffled orders; each baseline is compared with ``reference`` (``evaluation.reference``) on the
    same queries: paired two-sided Wilcoxon over per-query nDCG@10 (a variant's seeds averaged per query
    first), Holm-corrected over the baselines of each dataset × retriever and order condition."""
    q = with_variants(per_query(metrics).filter(pl.col("debias") == "none"), training)
    q = q.with_columns(condition=pl.when(pl.col("order") == orders.ORIGINAL).then(pl.lit("original"))
                       .when(pl.col("order").str.starts_with(orders.prefix("shuffled"))).then(pl.lit("shuffled"))
                       .otherwise(None)).drop_nulls("condition")
    # per model (seed) and query: the original value and the mean over the shuffles
    per_model = (q.group_by("variant", "model", "dataset", "retriever", "condition", "query_id", maintain_order=True)
                 .agg(pl.col("value").mean()))
    per_variant = (per_model.group_by("variant", "dataset", "retriever", "condition", "query_id", maintain_order=True)
                   .agg(pl.col("value").mean()).sort("dataset", "retriever", "condition", "variant", "query_id"))
    seeds = (per_model.group_by("variant", "model", "dataset", "retriever", "condition", maintain_order=True)
             .agg(pl.col("value").mean()))
    rows = []
    for (dataset, retriever, condition), group in per_variant.group_by("dataset", "retriever", "condition",
                                                                       maintain_order=True):
        ref = dict(group.filter(pl.col("variant") == reference).select("query_id", "value").iter_rows())
        for variant in sorted(group["variant"].unique().to_list(), key=lambda v: (v != reference, v)):
            mine = dict(group.filter(pl.col("variant") == variant).select("query_id", "value").iter_rows())
            common = sorted(set(mine) & set(ref))
            values = seeds.filter((pl.col("variant") == variant) & (pl.col("dataset") == dataset)
                                  & (pl.col("retriever") == retriever) & (pl.col("condition") == condition))["value"]
            mean, sd = mean_sd(values)
            p = (paired_pvalue([ref[x] for x in common], [mine[x] for x in common])
                 if variant != reference and len(common) > 1 else math.nan)
            rows.append({"dataset": dataset, "retriever": retriever, "condition": condition, "model": variant,
                         "seeds": len(values), "queries": len(mine), "ndcg10": mean, "ndcg10_sd": sd,
                         "paired_queries": len(common) if variant != reference else 0, "p": p})
    schema = {"dataset": pl.String, "retriever": pl.String, "condition": pl.String, "model": pl.String,
              "seeds": pl.Int64, "queries": pl.Int64, "ndcg10": pl.Float64, "ndcg10_sd": pl.Float64,
              "paired_queries": pl.Int64, "p": pl.Float64}
    data = pl.DataFrame(rows, schema=schema)
    adjusted = []
    for _, family in data.group_by("dataset", "retriever", "condition", maintain_order=True):
        adjusted += holm(family["p"].to_list())
    data = data.with_columns(p_holm=pl.Series(adjusted, dtype=pl.Float64)) if data.height else \
        data.with_columns(p_holm=pl.lit(None, pl.Float64))
    view = data.with_columns(
        column=pl.col("dataset") + " · " + pl.col("retriever") + " · " + pl.col("condition"),
        cell=pl.struct("ndcg10", "ndcg10_sd", "p_holm").map_elements(
            lambda r: fmt_sd(r["ndcg10"], math.nan if r["ndcg10_sd"] is None else r["ndcg10_sd"])
            + ("†" if r["p_holm"] is not None and r["p_holm"] < ALPHA else ""), return_dtype=pl.String))
    view = (view.pivot(on="column", index="model", values="cell").fill_null("–") if data.height
            else pl.DataFrame({"model": []}))
    notes = (f"nDCG@10 under the original order and the mean over the shuffled orders (mean ± sd over training "
             f"seeds). † differs from the reference model {reference!r} at α = {ALPHA}: two-sided Wilcoxon "
             "signed-rank test over the queries both reranked (each query's value averaged over a model's seeds "
             "and, for the shuffled condition, its shuffles), Holm-corrected over the baselines of each dataset, "
             "retriever and condition. Queries per cell in the CSV." if reference else
             "No reference model: set evaluation.reference to the model the baselines are tested against.")
    return Table(data, view, notes)
