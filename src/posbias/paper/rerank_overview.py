"""The reranking overview: every experiment × debiasing method on quality, stability and cost."""

from __future__ import annotations

import polars as pl

from posbias import debias
from posbias.paper.writers import Table, fmt


def rerank_table(summary: pl.DataFrame, window: int, step: int) -> Table:
    """Per experiment and debiasing method: quality (nDCG@10 original and shuffled), stability
    (τ-PSI, position-curve ends and spread) and cost (model calls, prompt tokens, seconds per query)."""
    registered = list(debias.DEBIAS_METHODS)
    rows = sorted(summary.iter_rows(named=True), key=lambda r: (
        r["dataset"], r["model"], registered.index(debias.parse(r["debias"]).method), r["debias"]))
    view = pl.DataFrame([{
        "model": r["model"], "dataset": r["dataset"], "retriever": r["retriever"], "debias": r["debias"],
        "queries": str(r["queries"]), "nDCG@10 original": fmt(r["ndcg10_original"]),
        "nDCG@10 shuffled (mean ± sd, M)":
            f"{fmt(r['ndcg10_shuffled_mean'])} ± {fmt(r['ndcg10_shuffled_sd'])} ({r['shuffles']})",
        "τ-PSI": fmt(r["tau_psi"]), "curve, first p": fmt(r["curve_first"]), "curve, last p": fmt(r["curve_last"]),
        "curve spread": fmt(r["curve_spread"]), "PSI": fmt(r["psi"]), "calls/query": fmt(r["calls_per_query"], 1),
        "tokens/query": fmt(r["prompt_tokens_per_query"], 0), "s/query": fmt(r["seconds_per_query"], 3),
        "parse failures": str(r["parse_failures"]),
    } for r in rows]) if rows else pl.DataFrame({"model": []})
    methods = "; ".join(f"{d}: {debias.parse(d).label}" for d in dict.fromkeys(r["debias"] for r in rows))
    notes = (f"Window {window}, step {step}. Shuffled: mean ± sd over the M shuffle seeds. τ-PSI: mean over "
             "queries of (1 − mean pairwise Kendall τ)/2 across the shuffled orders. Curve: nDCG@10 of the "
             "relevant passage moved to input position p (the first and the last measured p, max − min); PSI: Zeng et "
             "al.'s position sensitivity index over those positions, 1 − min/max. "
             f"Debiasing: {methods}.")
    return Table(pl.DataFrame(rows, schema=summary.schema) if rows else summary, view, notes)
