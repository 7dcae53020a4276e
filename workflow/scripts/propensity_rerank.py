"""Rerank every propensity sample (one window each) with the model whose bias is estimated."""

from posbias import hub, propensity, rerankers, schemas
from posbias.data.collection import grades_by_query, passage_texts
from posbias.jobs import logged
from posbias.rerank import rerank

sm = snakemake  # noqa: F821
with logged(sm, "propensity_rerank") as log:
    sampled = schemas.read(sm.input.samples, "propensity_samples")
    queries = schemas.read(sm.input.queries, "queries")
    corpus = schemas.read(sm.input.corpus, "corpus")
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    lists = propensity.sample_lists(sampled, dict(queries.iter_rows()), passage_texts(corpus))
    hub.require(sm.params.model_path, f"models.{sm.wildcards.model}.path")
    reranker = rerankers.build(sm.params.model, sm.params.model_path, grades, sm.params.seed, sm.params.device,
                               sm.params.word_budget)
    run, _, cost = rerank(reranker, lists, window=sm.params.k, step=sm.params.k,
                          batch_size=sm.params.model["batch_size"])
    schemas.write(propensity.transitions(sampled, run), sm.output.transitions, "transitions")
    schemas.write(cost, sm.output.cost, "cost")  # compared with the compute plan (posbias.plan)
    log.info("reranked %d lists (%d model calls, %.1f s)", len(lists), cost["calls"].sum(), cost["seconds"].sum())
