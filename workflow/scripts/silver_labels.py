"""Score the training queries' first-stage top-depth with the silver-label teacher (view 0 + T shuffles)."""

import json
import time

from posbias import atomic, hub, rerankers, schemas, silver
from posbias.data.collection import grades_by_query
from posbias.jobs import logged

sm = snakemake  # noqa: F821
oc = sm.params.ocsft
with logged(sm, "silver_labels") as log:
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    if sm.wildcards.teacher == silver.QRELS_TEACHER:
        teacher = silver.QRELS_TEACHER
    else:
        hub.require(sm.params.model_path, f"models.{sm.wildcards.teacher}.path")
        teacher = rerankers.build(sm.params.model, sm.params.model_path, grades, sm.params.seed, sm.params.device,
                                  sm.params.word_budget)
    start = time.perf_counter()
    labels, cost = silver.silver_labels(
        teacher, schemas.read(sm.input.run, "run"), schemas.read(sm.input.queries, "queries"),
        schemas.read(sm.input.corpus, "corpus"), grades, sm.params.seed, oc["depth"], sm.params.window,
        int(sm.wildcards.shuffles), oc.get("queries"), sm.params.model["batch_size"] if sm.params.model else None)
    wall = time.perf_counter() - start
    schemas.write(labels, sm.output.labels, "silver")
    schemas.write(cost, sm.output.cost, "cost")
    stats = {"dataset": sm.wildcards.dataset, "teacher": sm.wildcards.teacher, "shuffles": int(sm.wildcards.shuffles),
             "queries": labels["query_id"].n_unique(), "documents": labels.filter(labels["view"] == 0).height,
             "teacher_calls": int(cost["calls"].sum()) if cost.height else 0, "wall_seconds": wall,
             "label_ndcg10": silver.label_quality(labels, schemas.read(sm.input.qrels, "qrels")),
             "silver_beta": silver.label_consistency(labels) if int(sm.wildcards.shuffles) else None}
    atomic.write_text(sm.output.stats, json.dumps(stats, indent=1))
    log.info("silver labels: %s", stats)
