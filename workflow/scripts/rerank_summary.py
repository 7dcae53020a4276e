"""Permuted evaluation of one reranking experiment: per-query metrics, τ-PSI, position curve, summary."""

import json

import polars as pl

from posbias import orders, permuted_eval, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
w, position = sm.wildcards, sm.params.position  # the position protocol's keys; {} without position orders
keys = {"model": w.model, "dataset": w.dataset, "retriever": w.retriever, "debias": w.debias}
with logged(sm, "rerank_summary") as log:
    qrels = schemas.read(sm.input.qrels, "qrels")
    first_stage = schemas.read(sm.input.first_stage, "run")
    reranked = {order: schemas.read(path, "run") for order, path in zip(sm.params.orders, sm.params.runs)}
    stats = [json.loads(open(p).read()) for p in sm.params.stats]
    # the cost of one full-depth reranking: original and shuffled orders (position orders rerank only the top k)
    costs = pl.concat([schemas.read(p, "cost") for order, p in zip(sm.params.orders, sm.params.costs)
                       if not orders.is_kind(order, "position")])
    per_query = permuted_eval.condition_metrics(reranked, qrels, sm.params.measures, w.model, w.dataset, w.retriever,
                                                w.debias)
    schemas.write(per_query, sm.output.metrics, "rerank_metrics")
    ndcg = dict(per_query.filter(pl.col("measure") == "nDCG@10").group_by("order", maintain_order=True)
                .agg(pl.col("value").mean()).iter_rows())
    curve = permuted_eval.position_curve(reranked, first_stage, qrels, sm.params.seed, position.get("relevant_grade"),
                                         position.get("position_k"), ndcg)
    schemas.write(curve.select(*[pl.lit(v).alias(k) for k, v in keys.items()], pl.all()), sm.output.curve,
                  "position_curve")
    summary = permuted_eval.summarize(keys, per_query, reranked, curve, costs, stats)
    schemas.write(summary, sm.output.summary, "rerank_summary")
    log.info("\n%s", summary.transpose(include_header=True))
