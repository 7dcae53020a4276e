"""DebiasFirst Table 2: reranking different first-stage runs."""

from __future__ import annotations

import math

import polars as pl

from posbias import orders
from posbias.paper.seeds import per_query, with_variants
from posbias.paper.writers import Table, fmt_sd


def retrievers(metrics: pl.DataFrame, first_stage: pl.DataFrame, training: dict | None = None) -> Table:
    """DebiasFirst Table 2: reranked nDCG@10 (original order) per model and dataset × first-stage retriever,
    with the first-stage run itself as the first row; a model's training seeds as mean ± sd."""
    q = with_variants(per_query(metrics).filter((pl.col("debias") == "none") & (pl.col("order") == orders.ORIGINAL)),
                       training or {})
    per_seed = q.group_by("variant", "model", "dataset", "retriever", maintain_order=True).agg(
        pl.col("value").mean().alias("ndcg10"), pl.len().alias("queries"))
    reranked = per_seed.group_by("variant", "dataset", "retriever", maintain_order=True).agg(
        pl.len().alias("seeds"), pl.col("queries").first(), pl.col("ndcg10").std().alias("ndcg10_sd"),
        pl.col("ndcg10").mean()).rename({"variant": "model"})
    pairs = reranked.select("dataset", "retriever").unique(maintain_order=True)
    base = (per_query(first_stage).rename({"system": "retriever"})
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
