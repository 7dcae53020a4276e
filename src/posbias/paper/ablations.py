"""DebiasFirst Table 3: objective × augmentation ablations of the trained listwise models."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from posbias import methods
from posbias.config import variant_of
from posbias.paper.stats import mean_sd
from posbias.paper.writers import Table, fmt, fmt_sd
from posbias.training import families


def ablations(summaries: pl.DataFrame, curves: pl.DataFrame, training: dict) -> Table:
    """DebiasFirst Table 3: objective (rows) × augmentation (columns) of the trained models: nDCG@10
    under shuffled orders and the variance of the position curve, seeds of one entry pooled."""
    runs = {name: run for name, run in training.items() if families.of(run["method"]).augmented}
    per_seed = []
    for name, run in runs.items():
        s = summaries.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        c = curves.filter((pl.col("model") == name) & (pl.col("debias") == "none"))
        for r in s.iter_rows(named=True):
            values = c.filter((pl.col("dataset") == r["dataset"]) & (pl.col("retriever") == r["retriever"]))
            per_seed.append({"model": variant_of(training, name), "method": run["method"],
                             "objective": methods.get(run["method"]).label, "aug": run["aug"],
                             "dataset": r["dataset"], "retriever": r["retriever"],
                             "shuffled": r["ndcg10_shuffled_mean"], "shuffle_sd": r["ndcg10_shuffled_sd"],
                             "variance": float(np.var(values["target_ndcg10"].to_numpy())) if values.height
                             else math.nan})
    if not per_seed:
        return Table(pl.DataFrame(), pl.DataFrame({"method": []}), "No training entries with an augmentation are configured.")
    rows = []
    for (model, method, objective, aug, dataset, retriever), g in pl.DataFrame(per_seed).group_by(
            "model", "method", "objective", "aug", "dataset", "retriever", maintain_order=True):
        mean, sd = mean_sd(g["shuffled"])
        rows.append({"model": model, "method": method, "objective": objective, "aug": aug, "dataset": dataset,
                     "retriever": retriever,
                     "seeds": g.height, "ndcg10_shuffled": mean,
                     "ndcg10_shuffled_sd": sd if g.height > 1 else g["shuffle_sd"][0],
                     "curve_variance": float(g["variance"].mean())})
    data = pl.DataFrame(rows)
    view = data.with_columns(
        cell=pl.struct("ndcg10_shuffled", "ndcg10_shuffled_sd", "curve_variance").map_elements(
            lambda r: f"{fmt_sd(r['ndcg10_shuffled'], r['ndcg10_shuffled_sd'])} (var {fmt(r['curve_variance'], 3)})",
            return_dtype=pl.String),
        column=pl.col("aug") + " · " + pl.col("dataset") + " · " + pl.col("retriever"))
    if view.select("objective", "column").is_duplicated().any():  # two models in one cell: one row each
        view = view.with_columns(objective=pl.col("objective") + " (" + pl.col("model") + ")")
    view = view.pivot(on="column", index="objective", values="cell").fill_null("–")
    notes = ("nDCG@10 under shuffled orders, mean ± sd over training seeds (a single seed: ± sd over the shuffle "
             "seeds) and, in brackets, the variance over input positions of the position curve (nDCG@10 of the "
             "moved relevant passage; mean over seeds); lower variance = less position bias. Seeds per cell in the CSV.")
    return Table(data, view, notes)
