"""OC-SFT: quality vs decision stability of the pointwise scorers, with BSC@K."""

from __future__ import annotations

import polars as pl

from posbias.paper.writers import Table, fmt


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
