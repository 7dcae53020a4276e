"""Rerank one experiment's candidates with one debiasing method in a batch of evaluation orders,
loading the model once (config.rerank_batches).

Writes, per order, into the batch folder: the run (Parquet and TREC), the window log, the per-query cost
and a stats JSON (totals, skipped queries, seeds); rule ``rerank_order`` copies them to the per-order
paths."""

import json
import time

from tqdm import tqdm

from posbias import atomic, hub, rerankers, runs, schemas
from posbias.data.collection import grades_by_query
from posbias.jobs import logged
from posbias.partial import PartialFolder, digest
from posbias.rerank import ORDER_FILES, Experiment, rerank_order

sm = snakemake  # noqa: F821
rr, seed = sm.params.settings, sm.params.seed  # only the config keys this job reads (config.rerank_settings)
with logged(sm, "rerank") as log:
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    first_stage = schemas.read(sm.input.run, "run")
    queries, corpus = schemas.read(sm.input.queries, "queries"), schemas.read(sm.input.corpus, "corpus")
    # orders finished before a preemption or a failed attempt (same params, inputs and code) are kept;
    # the stats file is written last, so it marks a finished order
    folder = PartialFolder(sm.output[0], digest(dict(sm.params.items()), list(sm.input)))
    pending = [name for name in sm.params.orders if not folder.done(f"{name}{ORDER_FILES['stats']}")]
    if folder.resumed:
        log.info("%d orders kept from an interrupted run of this job", folder.resumed)
    if pending:  # the model loads only if there is something to rerank
        hub.require(sm.params.model_path, f"models.{sm.wildcards.model}.path")
        start = time.perf_counter()
        base = rerankers.build(sm.params.model, sm.params.model_path, grades, seed, sm.params.device,
                               rr.get("word_budget"))
        log.info("loaded %s in %.1f s; %d orders to rerank", sm.wildcards.model, time.perf_counter() - start,
                 len(pending))
    data = Experiment(sm.wildcards.dataset, first_stage, queries, corpus, grades)
    for name in tqdm(pending, desc=f"rerank {sm.wildcards.model} {sm.wildcards.debias}", unit="order"):
        start = time.perf_counter()
        shown, run, window_log, cost = rerank_order(base, name, sm.wildcards.debias, rr, seed, data,
                                                    sm.params.model["batch_size"])
        wall = time.perf_counter() - start
        if shown.no_candidates:
            log.warning("%d queries have no first-stage candidates; skipped", shown.no_candidates)
        if shown.not_applicable:
            log.info("%d queries have no relevant passage in the top %d; skipped for %s", shown.not_applicable,
                     rr["position_k"], name)
        out = {key: folder.path(f"{name}{suffix}") for key, suffix in ORDER_FILES.items()}
        schemas.write(run, out["run"], "run")
        runs.write_trec(run, out["trec"], f"{sm.wildcards.model}.{sm.wildcards.debias}")  # trec_eval, ranx, rank_llm
        schemas.write(window_log, out["windows"], "window_log")
        schemas.write(cost, out["cost"], "cost")
        stats = {
            "order": name, "debias": sm.wildcards.debias, "queries": len(shown.lists),
            "skipped_no_candidates": shown.no_candidates, "skipped_not_applicable": shown.not_applicable,
            "windows": window_log.select("query_id", "window").n_unique() if window_log.height else 0,
            "wall_seconds": wall, **base.stats, "shuffle_seeds": shown.seeds,
        }
        atomic.write_text(out["stats"], json.dumps(stats, indent=1, sort_keys=True))
        if stats.get("truncated_passages"):
            log.info("%s: %d passages were cut to fit the word budget or the context", name,
                     stats["truncated_passages"])
        if stats.get("parse_failures") or stats.get("missing_ids"):
            log.warning("%s: %d windows without a parsable ranking, %d identifiers missing (appended in input "
                        "order)", name, stats["parse_failures"], stats["missing_ids"])
        log.info("%s: reranked %d queries in %.1f s (%d windows)", name, len(shown.lists), wall, stats["windows"])
    folder.finish()
