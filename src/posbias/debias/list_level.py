"""The list-level debias methods' combine steps. PermSC as the papers define it: aggregate the reranked full lists of K seeded shuffles.

Each of K seeded shuffles of a query's first-stage candidates is reranked with the sliding window
(the experiment's ``shuffled-0`` … ``shuffled-(K−1)`` runs of debias ``none``), and the K rankings
are aggregated into one central ranking (:func:`posbias.debias.maths.aggregate`: Kemeny-optimal where
exact is tractable, local Kemenisation from Borda beyond). Aggregation adds no model call; the cost
of PermSC@K is the K reranking passes it aggregates. Because it starts from random shuffles, the
result does not depend on the first-stage order: the workflow writes it as the ``original`` order.
"""

from __future__ import annotations

import polars as pl
from tqdm import tqdm

from posbias.debias import maths
from posbias.runs import strictly_decreasing


def aggregate_runs(runs: list[pl.DataFrame], aggregation: str) -> pl.DataFrame:
    """The central ranking of each query over the reranked ``runs`` (schema RUN, rank-derived scores).

    Queries present in only some runs (e.g. skipped for want of candidates) are aggregated over the
    runs that have them; each run must rank the same documents for a query.
    """
    if not runs:
        raise ValueError("PermSC needs at least one reranked list per query")
    per_run = [dict(r.sort("query_id", "rank").group_by("query_id", maintain_order=True)
                    .agg(pl.col("doc_id")).iter_rows()) for r in runs]
    queries = sorted(set().union(*per_run))
    rows = []
    for qid in tqdm(queries, desc="permsc", unit="query", mininterval=5):
        rankings = [ranking[qid] for ranking in per_run if qid in ranking]
        if any(sorted(r) != sorted(rankings[0]) for r in rankings):
            raise ValueError(f"query {qid}: the reranked shuffles rank different documents; PermSC aggregates "
                             "rankings of the same candidates (same depth for every order)")
        central = rankings[0] if len(rankings) == 1 else maths.aggregate(rankings, aggregation)
        rows += [(qid, doc, r + 1, float(len(central) - r)) for r, doc in enumerate(central)]
    run = pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "rank": pl.Int32,
                                     "score": pl.Float64}, orient="row")
    return run.with_columns(score=pl.Series(strictly_decreasing(run["score"].to_numpy(), run["query_id"].to_numpy())))


def summed_costs(costs: list[pl.DataFrame]) -> pl.DataFrame:
    """Per-query cost of the K reranking passes (schema COST): windows, calls, tokens and seconds added up."""
    return (pl.concat(costs).group_by("query_id", maintain_order=True)
            .agg(pl.col("windows", "calls", "prompt_tokens", "seconds").sum()).sort("query_id"))
