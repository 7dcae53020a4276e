"""Rerank one experiment's candidates in one evaluation order with one debiasing method.

Writes the run, the window log, the per-query cost and a stats JSON (totals, skipped queries, seeds)."""

import json
import time
from pathlib import Path

from posbias import debiasing, orders, rerankers, runs, schemas
from posbias.data.collection import grades_by_query
from posbias.errors import PosbiasError
from posbias.jobs import logged
from posbias.rerank import present_candidates, rerank

sm = snakemake  # noqa: F821
rr, seed = sm.params.settings, sm.params.seed  # only the config keys this job reads (config.rerank_settings)
with logged(sm, "rerank") as log:
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    order = orders.parse(sm.wildcards.order)
    shown = present_candidates(
        schemas.read(sm.input.run, "run"), schemas.read(sm.input.queries, "queries"),
        schemas.read(sm.input.corpus, "corpus"), grades, order, seed, rr["depth"],
        rr.get("relevant_grade"), rr.get("position_k"), rr["queries"],
    )
    if shown.no_candidates:
        log.warning("%d queries have no first-stage candidates; skipped", shown.no_candidates)
    if order.kind == "position" and shown.not_applicable and not shown.lists:
        best = max((g for q in grades.values() for g in q.values()), default=None)
        raise PosbiasError(f"reranking.relevant_grade {rr['relevant_grade']}: no query of {sm.wildcards.dataset} has a "
                           f"passage graded that high in its top {rr['position_k']} (the qrels' highest grade is "
                           f"{best}), so {order} has nothing to move; lower reranking.relevant_grade")
    if shown.not_applicable:
        log.info("%d queries have no relevant passage in the top %d; skipped for %s", shown.not_applicable,
                 rr["position_k"], order)
    base = rerankers.build(sm.params.model, sm.params.model_path, grades, seed, sm.params.device,
                           rr.get("word_budget"))
    reranker = debiasing.wrap(base, sm.wildcards.debias, seed, rr["debias"])
    start = time.perf_counter()
    run, window_log, cost = rerank(reranker, shown.lists, base.window or rr["window"], rr["step"],
                                   sm.params.model["batch_size"])
    wall = time.perf_counter() - start
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, f"{sm.wildcards.model}.{sm.wildcards.debias}")  # for trec_eval, ranx, rank_llm
    schemas.write(window_log, sm.output.windows, "window_log")
    schemas.write(cost, sm.output.cost, "cost")
    stats = {
        "order": str(order), "debias": sm.wildcards.debias, "queries": len(shown.lists), "skipped_no_candidates": shown.no_candidates,
        "skipped_not_applicable": shown.not_applicable,
        "windows": window_log.select("query_id", "window").n_unique() if window_log.height else 0,
        "wall_seconds": wall, **base.stats, "shuffle_seeds": shown.seeds,
    }
    Path(sm.output.stats).write_text(json.dumps(stats, indent=1, sort_keys=True))
    if stats.get("truncated_passages"):
        log.info("%d passages were cut to fit the word budget or the context", stats["truncated_passages"])
    if stats.get("parse_failures") or stats.get("missing_ids"):
        log.warning("generation: %d windows without a parsable ranking, %d identifiers missing (appended in input order)",
                    stats["parse_failures"], stats["missing_ids"])
    log.info("reranked %d queries in %.1f s (%d windows)", len(shown.lists), wall, stats["windows"])
