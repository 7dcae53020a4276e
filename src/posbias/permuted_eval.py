"""Permuted evaluation of reranked runs: quality per order, τ-PSI over shuffles, the position curve.

Inputs are the reranked runs of one experiment (model × dataset × retriever), keyed by order
string (``original``, ``shuffled-<s>``, ``position-<p>``), the qrels and the first-stage run.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from posbias import metrics, orders
from posbias.data.collection import relevance_threshold, top_grade
from posbias.debias import CAPCAL_COUNTERS


def condition_metrics(reranked: dict[str, pl.DataFrame], qrels: pl.DataFrame, measures: list[str],
                      model: str, dataset: str, retriever: str, debias: str = "none") -> pl.DataFrame:
    """Per-query metrics of every condition, long format (schema RERANK_METRICS).

    Each condition is evaluated over the queries it reranked (position orders skip queries without
    a relevant passage in the top k), so conditions of one kind share a query set.
    """
    frames, dl_graded = [], metrics.is_dl_graded(qrels)  # the collection's scale, whatever queries were reranked
    for order, run in reranked.items():
        judged = qrels.filter(pl.col("query_id").is_in(run["query_id"].unique().implode()))
        per_query = metrics.evaluate(run, judged, measures, model, dataset, dl_graded)
        frames.append(per_query.select(
            pl.lit(model).alias("model"), pl.lit(dataset).alias("dataset"), pl.lit(retriever).alias("retriever"),
            pl.lit(order).alias("order"), pl.lit(debias).alias("debias"), "query_id", "measure", "value",
        ))
    return pl.concat(frames)


def rankings_by_query(run: pl.DataFrame) -> dict[str, list[str]]:
    ordered = run.sort("query_id", "rank").group_by("query_id", maintain_order=True).agg(pl.col("doc_id"))
    return dict(zip(ordered["query_id"].to_list(), ordered["doc_id"].to_list()))


def psi_over_shuffles(reranked: dict[str, pl.DataFrame]) -> tuple[float, int]:
    """Mean per-query τ-PSI over the shuffled conditions, and the number of queries it averages."""
    shuffled = [rankings_by_query(run) for order, run in reranked.items() if orders.is_kind(order, "shuffled")]
    if len(shuffled) < 2:
        return float("nan"), 0
    common = set.intersection(*(set(r) for r in shuffled))
    values = [metrics.tau_psi([r[q] for r in shuffled]) for q in sorted(common)]
    return (float(np.mean(values)) if values else float("nan")), len(values)


def position_curve(reranked: dict[str, pl.DataFrame], first_stage: pl.DataFrame, qrels: pl.DataFrame,
                   root_seed: int, relevant_grade: int | None, k: int | None, ndcg: dict[str, float]) -> pl.DataFrame:
    """One row per position order: how the moved relevant passage ranks after reranking (``relevant_grade``
    and ``k`` are None when ``reranked`` has no position order).

    target_ndcg10 is nDCG@10 with the moved passage as the only relevant one (1/log2(1+rank) within
    the top 10), target_mrr its reciprocal rank, target_rank its mean rank; ndcg10 is the ordinary
    nDCG@10 (all qrels) of that condition, passed in as ``ndcg``.
    """
    threshold = 0 if relevant_grade is None else relevance_threshold(relevant_grade, top_grade(qrels))
    relevant = (qrels.filter(pl.col("relevance") >= threshold)
                .group_by("query_id", maintain_order=True).agg(pl.col("doc_id")))
    relevant_sets = {q: set(d) for q, d in zip(relevant["query_id"].to_list(), relevant["doc_id"].to_list())}
    first = rankings_by_query(first_stage)
    rows = []
    for order_name, run in reranked.items():
        order = orders.parse(order_name)
        if order.kind != "position":
            continue
        ranks = []
        for qid, ranking in rankings_by_query(run).items():
            presented = orders.present(first[qid], order, root_seed, qid, relevant_sets.get(qid, set()), k)
            target = presented[order.index - 1]
            ranks.append(ranking.index(target) + 1)
        r = np.array(ranks, dtype=float)
        per_query = {"target_ndcg10": np.where(r <= 10, 1.0 / np.log2(r + 1), 0.0), "target_mrr": 1.0 / r}
        row = {"position": order.index, "queries": len(ranks), "ndcg10": ndcg.get(order_name, float("nan")),
               "target_rank": float(np.mean(r)) if len(r) else math.nan}
        for name, values in per_query.items():
            row[name] = float(np.mean(values)) if len(values) else math.nan
            row[f"{name}_lo"], row[f"{name}_hi"] = query_interval(values, root_seed)
        rows.append(row)
    return pl.DataFrame(rows, schema={"position": pl.Int32, "queries": pl.Int64, "ndcg10": pl.Float64,
                                      "target_ndcg10": pl.Float64, "target_mrr": pl.Float64,
                                      "target_rank": pl.Float64, **{f"{m}_{end}": pl.Float64 for m in CURVE_METRICS
                                                                    for end in ("lo", "hi")}}).sort("position")


CURVE_METRICS = ("target_ndcg10", "target_mrr")


def query_interval(values: np.ndarray, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean over queries (scipy.stats.bootstrap, 2,000 resamples,
    seeded): what the position curve's band shows. NaN with fewer than two queries; the point itself where
    every query scored the same (the bootstrap distribution is degenerate)."""
    from scipy.stats import bootstrap

    if len(values) < 2:
        return math.nan, math.nan
    if np.ptp(values) == 0:
        return float(values[0]), float(values[0])
    ci = bootstrap((values,), np.mean, n_resamples=2000, confidence_level=level, method="percentile",
                   random_state=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


def summarize(keys: dict[str, str], per_query: pl.DataFrame, reranked: dict[str, pl.DataFrame], curve: pl.DataFrame,
              costs: pl.DataFrame, stats: list[dict]) -> pl.DataFrame:
    """One RERANK_SUMMARY row: quality under original and shuffled orders, stability, curve ends, cost.

    ``keys`` holds model, dataset, retriever and debias; ``costs`` the per-query cost tables of the
    full-depth (original and shuffled) conditions; ``stats`` the per-condition stats records.
    """
    ndcg = dict(per_query.filter(pl.col("measure") == "nDCG@10").group_by("order", maintain_order=True)
                .agg(pl.col("value").mean()).iter_rows())
    shuffled = [v for k, v in ndcg.items() if orders.is_kind(k, "shuffled")]
    psi, _ = psi_over_shuffles(reranked)
    values = curve.sort("position")["target_ndcg10"].to_list()  # by input position: first to last
    return pl.DataFrame([{
        **keys,
        "queries": per_query.filter(pl.col("order") == orders.ORIGINAL)["query_id"].n_unique(),
        "ndcg10_original": ndcg.get(orders.ORIGINAL, math.nan),
        "ndcg10_shuffled_mean": float(np.mean(shuffled)) if shuffled else math.nan,
        "ndcg10_shuffled_sd": float(np.std(shuffled, ddof=1)) if len(shuffled) > 1 else math.nan,
        "shuffles": len(shuffled), "tau_psi": psi,
        "curve_spread": (max(values) - min(values)) if values else math.nan,
        "curve_first": values[0] if values else math.nan,
        "curve_last": values[-1] if values else math.nan,
        "psi": metrics.position_sensitivity_index(values) if values and max(values) > 0 else math.nan,
        "windows": sum(s["windows"] for s in stats), "wall_seconds": sum(s["wall_seconds"] for s in stats),
        "calls_per_query": costs["calls"].mean(), "prompt_tokens_per_query": costs["prompt_tokens"].mean(),
        "seconds_per_query": costs["seconds"].mean(),
        "parse_failures": sum(s.get("parse_failures", 0) for s in stats),
        "missing_ids": sum(s.get("missing_ids", 0) for s in stats),
        **capcal_alpha_summary(stats),
    }])


def capcal_alpha_summary(stats: list[dict]) -> dict[str, float]:
    """CapCal's α over all calibration steps of the conditions (``posbias.debias.wrappers.CapCalDebiased``
    counts them): mean, sd, and the share of adaptive steps at the cap α_max; NaN without CapCal (or,
    for the share, with a fixed α)."""
    total = {key: sum(s.get(key, 0) for s in stats) for key in CAPCAL_COUNTERS}
    n, adaptive = total["capcal_steps"], total["capcal_adaptive_steps"]
    mean = total["capcal_alpha_sum"] / n if n else math.nan
    var = (total["capcal_alpha_sq_sum"] - n * mean * mean) / (n - 1) if n > 1 else math.nan
    return {"capcal_alpha_mean": mean, "capcal_alpha_sd": math.sqrt(max(var, 0.0)) if n > 1 else math.nan,
            "capcal_at_cap": total["capcal_at_cap"] / adaptive if adaptive else math.nan}
