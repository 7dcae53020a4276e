"""Training seeds in tables and figures: a model ``<name>-s<seed>`` is one seed of the variant ``<name>``."""

from __future__ import annotations

import polars as pl

from posbias.config import variant_of


def with_variants(frame: pl.DataFrame, training: dict) -> pl.DataFrame:
    """``frame`` with a ``variant`` column: the training entry each ``model`` is a seed of."""
    names = {m: variant_of(training, m) for m in frame["model"].unique().to_list()}
    return frame.with_columns(variant=pl.col("model").replace_strict(names, return_dtype=pl.String))


def named_variants(frame: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    """``frame`` with a ``variant`` column from a report rule's ``variants`` param ({model: variant}); a model
    it does not name is its own variant."""
    return frame.with_columns(variant=pl.col("model").replace_strict(variants, default=pl.col("model")))


def per_query(metrics: pl.DataFrame, measure: str = "nDCG@10") -> pl.DataFrame:
    return metrics.filter(pl.col("measure") == measure)


def seed_curves(curves: pl.DataFrame, training: dict, debias: str | None = "none") -> pl.DataFrame:
    """Position curves averaged over each variant's seeds: mean and sd (over seeds) per position, for
    one debiasing method (None: every method, as its own curve)."""
    c = with_variants(curves if debias is None else curves.filter(pl.col("debias") == debias), training)
    keys = ("variant", "dataset", "retriever", "debias")
    return (c.group_by(*keys, "position", maintain_order=True)
            .agg(pl.len().alias("seeds"),
                 *[pl.col(m).mean().alias(m) for m in ("target_ndcg10", "target_mrr")],
                 *[pl.col(m).std().fill_null(0.0).alias(f"{m}_sd") for m in ("target_ndcg10", "target_mrr")])
            .sort(*keys, "position"))
