"""Permuted evaluation of one reranking experiment: per-query metrics, τ-PSI, position curve, summary."""

import json
import math

import numpy as np
import polars as pl

from posbias import permuted_eval, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
w, rr = sm.wildcards, sm.params.reranking
with logged(sm.log[0], "rerank_summary") as log:
    qrels = schemas.read(sm.input.qrels, "qrels")
    first_stage = schemas.read(sm.input.first_stage, "run")
    reranked = {order: schemas.read(path, "run") for order, path in zip(sm.params.orders, sm.input.runs)}
    stats = [json.loads(open(p).read()) for p in sm.input.stats]
    # cost of one full-depth reranking: original and shuffled orders (position orders rerank only the top k)
    costs = pl.concat([schemas.read(p, "cost") for order, p in zip(sm.params.orders, sm.input.costs)
                       if not order.startswith("position-")])
    per_query = permuted_eval.condition_metrics(reranked, qrels, sm.params.measures, w.model, w.dataset, w.retriever,
                                                w.debias)
    schemas.write(per_query, sm.output.metrics, "rerank_metrics")
    ndcg = dict(per_query.filter(pl.col("measure") == "nDCG@10").group_by("order").agg(pl.col("value").mean()).iter_rows())
    curve = permuted_eval.position_curve(reranked, first_stage, qrels, sm.params.seed, rr["relevant_grade"],
                                         rr["position_k"], ndcg)
    schemas.write(curve.select(pl.lit(w.model).alias("model"), pl.lit(w.dataset).alias("dataset"),
                               pl.lit(w.retriever).alias("retriever"), pl.lit(w.debias).alias("debias"), pl.all()),
                  sm.output.curve, "position_curve")
    psi, psi_queries = permuted_eval.psi_over_shuffles(reranked)
    shuffled = [v for k, v in ndcg.items() if k.startswith("shuffled-")]
    curve_values = curve["target_ndcg10"].to_list()
    summary = pl.DataFrame([{
        "model": w.model, "dataset": w.dataset, "retriever": w.retriever, "debias": w.debias,
        "queries": per_query.filter(pl.col("order") == "original")["query_id"].n_unique(),
        "ndcg10_original": ndcg.get("original", math.nan),
        "ndcg10_shuffled_mean": float(np.mean(shuffled)) if shuffled else math.nan,
        "ndcg10_shuffled_sd": float(np.std(shuffled, ddof=1)) if len(shuffled) > 1 else math.nan,
        "shuffles": len(shuffled), "tau_psi": psi,
        "curve_spread": (max(curve_values) - min(curve_values)) if curve_values else math.nan,
        "curve_first": curve_values[0] if curve_values else math.nan,
        "curve_last": curve_values[-1] if curve_values else math.nan,
        "windows": sum(s["windows"] for s in stats), "wall_seconds": sum(s["wall_seconds"] for s in stats),
        # the cost of reranking one query once at full depth: means over (original/shuffled order, query)
        "calls_per_query": costs["calls"].mean(), "prompt_tokens_per_query": costs["prompt_tokens"].mean(),
        "seconds_per_query": costs["seconds"].mean(),
        "parse_failures": sum(s.get("parse_failures", 0) for s in stats),
        "missing_ids": sum(s.get("missing_ids", 0) for s in stats),
    }])
    schemas.write(summary, sm.output.summary, "rerank_summary")
    log.info("\n%s", summary.transpose(include_header=True))
