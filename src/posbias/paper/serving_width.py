"""One checkpoint served at several window widths B (the OC-SFT paper's serving design: "读取方式在任意宽度下不变,
一个 checkpoint 可以跨 B 服务而无需重训"; "B=20 时每查询延迟比逐候选评分降低约 45%").

The Grades readout is the same at any B, so a models entry whose ``path`` names a trained scorer serves that
checkpoint at its own ``grade_window``. Per (checkpoint, dataset) served at two or more widths: quality,
stability, calls and measured model seconds per query at each B (the stability stage's K = 1 rows), and the
latency saved against B = 1 (each candidate alone), the comparison the paper's 45% makes.
"""

from __future__ import annotations

import math

import polars as pl

from posbias.debias.adaptive import FIXED
from posbias.paper.writers import Table, fmt


def serving_width(stability: pl.DataFrame, widths: list[dict]) -> Table:
    """Per checkpoint, dataset and B (``widths``: :func:`posbias.config.served_widths`, the checkpoints served at
    several B), the plain scorer's
    (K = 1) nDCG@10 (canonical order and over shuffles), τ-PSI, retention Jaccard, calls and model seconds
    per query, and ``latency_saved``: 1 − seconds per query / those at B = 1 (NaN without a B = 1 row)."""
    served = pl.DataFrame(widths, schema={"model": pl.String, "dataset": pl.String, "retriever": pl.String,
                                          "checkpoint": pl.String, "window": pl.Int64})
    rows = (stability.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED) & (pl.col("debias") == "none"))
            .join(served, on=["model", "dataset", "retriever"])
            .group_by("checkpoint", "dataset", "retriever", "window", maintain_order=True)
            .agg(pl.col("ndcg10_canonical", "ndcg10", "tau_psi", "jaccard", "calls_per_query",
                        "seconds_per_query").mean())
            .sort("checkpoint", "dataset", "retriever", "window"))
    one = rows.filter(pl.col("window") == 1).select("checkpoint", "dataset", "retriever",
                                                    pl.col("seconds_per_query").alias("seconds_b1"))
    data = rows.join(one, on=["checkpoint", "dataset", "retriever"], how="left").with_columns(
        latency_saved=(1 - pl.col("seconds_per_query") / pl.col("seconds_b1")).fill_null(math.nan)).drop("seconds_b1")
    view = pl.DataFrame([{
        "checkpoint": r["checkpoint"], "dataset": f"{r['dataset']} · {r['retriever']}", "B": str(r["window"]),
        "nDCG@10 canonical": fmt(r["ndcg10_canonical"], 3), "nDCG@10 shuffled": fmt(r["ndcg10"], 3),
        "τ-PSI": fmt(r["tau_psi"], 3), "retention Jaccard": fmt(r["jaccard"], 3),
        "calls/query": fmt(r["calls_per_query"], 1), "model s/query": fmt(r["seconds_per_query"], 3),
        "latency saved vs B = 1": "–" if math.isnan(r["latency_saved"]) else f"{100 * r['latency_saved']:.0f}%",
    } for r in data.iter_rows(named=True)], schema={c: pl.String for c in (
        "checkpoint", "dataset", "B", "nDCG@10 canonical", "nDCG@10 shuffled", "τ-PSI", "retention Jaccard",
        "calls/query", "model s/query", "latency saved vs B = 1")})
    notes = ("One trained checkpoint read with the same Grades readout at several window widths B (models entries "
             "whose path names it, each with its grade_window), K = 1 (the plain scorer; means over the entries "
             "reading it). B = 1 scores each candidate alone: no companion, so no order to depend on, at one call "
             "per candidate. model s/query: the rerank jobs' measured model seconds per query (cost files) on this "
             "machine; latency saved: 1 − seconds per query / those at B = 1 (the OC-SFT paper reports about 45% "
             "at B = 20 for its 4B scorer on its hardware; a tiny model on a CPU is no measure of that number).")
    return Table(data, view, notes)
