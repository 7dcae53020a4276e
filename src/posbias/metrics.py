"""Evaluation of runs against qrels with ir_measures, in the long format every table is built from.

Conventions: a query is evaluated when it has qrels; a qrels query missing from the run (no
hits) scores 0 on every measure rather than being dropped, so systems are always averaged over the
same query set. Runs are canonical (:mod:`posbias.runs`), so the score order ir_measures sorts by
is exactly the rank order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import ir_measures
import polars as pl
from scipy.stats import kendalltau

from posbias.errors import PosbiasError


def parse_measures(names: list[str]) -> list:
    """Parse measure names in ir_measures syntax (``nDCG@10``, ``R@100``, ``AP``, ``AP(rel=2)``)."""
    measures = []
    for name in names:
        try:
            measures.append(ir_measures.parse_measure(name))
        except (NameError, ValueError, SyntaxError, TypeError):
            raise PosbiasError(
                f"evaluation.measures: {name!r} is not an ir_measures measure (e.g. nDCG@10, R@100, AP)"
            ) from None
    return measures


def evaluate(run: pl.DataFrame, qrels: pl.DataFrame, measure_names: list[str], system: str, dataset: str) -> pl.DataFrame:
    """Per-query values of every measure, long format (system, dataset, query_id, measure, value)."""
    measures = parse_measures(measure_names)
    judged = qrels["query_id"].unique().sort().to_list()
    run = run.filter(pl.col("query_id").is_in(judged))
    qrels_iter = (ir_measures.Qrel(q, d, int(r)) for q, d, r in qrels.select("query_id", "doc_id", "relevance").iter_rows())
    run_iter = [ir_measures.ScoredDoc(q, d, s) for q, d, s in run.select("query_id", "doc_id", "score").iter_rows()]
    values = {(m.query_id, str(m.measure)): float(m.value) for m in ir_measures.iter_calc(measures, qrels_iter, run_iter)}
    rows = [
        (system, dataset, qid, str(measure), values.get((qid, str(measure)), 0.0))
        for qid in judged
        for measure in measures
    ]
    return pl.DataFrame(rows, schema=["system", "dataset", "query_id", "measure", "value"], orient="row")


def aggregate(per_query: pl.DataFrame) -> pl.DataFrame:
    """Mean over queries per (system, dataset, measure), with the number of queries."""
    return (
        per_query.group_by("system", "dataset", "measure", maintain_order=True)
        .agg(pl.col("value").mean(), pl.len().alias("queries"))
        .sort("dataset", "system", "measure")
    )


def markdown_table(aggregated: pl.DataFrame, measure_order: list[str]) -> str:
    """One row per (dataset, system), one column per measure, values to 4 decimals."""
    wide = aggregated.pivot(on="measure", index=["dataset", "system", "queries"], values="value")
    cols = [str(m) for m in parse_measures(measure_order) if str(m) in wide.columns]
    header = "| dataset | system | queries | " + " | ".join(cols) + " |"
    lines = [header, "|" + "---|" * (3 + len(cols))]
    for row in wide.sort("dataset", "system").iter_rows(named=True):
        vals = " | ".join(f"{row[c]:.4f}" for c in cols)
        lines.append(f"| {row['dataset']} | {row['system']} | {row['queries']} | {vals} |")
    return "\n".join(lines) + "\n"


def tau_psi(rankings: Sequence[Sequence[str]]) -> float:
    """One query's permutation sensitivity ψ = (1 − mean Kendall τ) / 2 over all pairs of its rankings.

    ``rankings`` are the M ≥ 2 rankings (best first) of the same items produced from M input
    orders. ψ = 0 when every ranking agrees, 0.5 for unrelated rankings, 1 for pairwise reversals.
    """
    if len(rankings) < 2:
        raise ValueError(f"tau_psi needs at least 2 rankings, got {len(rankings)}")
    items = sorted(rankings[0])
    if len(items) < 2:
        return 0.0
    positions = []
    for ranking in rankings:
        if sorted(ranking) != items:
            raise ValueError("tau_psi: every ranking must order the same items")
        where = {doc: i for i, doc in enumerate(ranking)}
        positions.append([where[doc] for doc in items])
    taus = [kendalltau(a, b).statistic for a, b in combinations(positions, 2)]
    return (1.0 - sum(taus) / len(taus)) / 2.0
