"""Rerank one experiment's candidates with one debiasing method in a batch of evaluation orders, loading the
model once (config.rerank_batches); write each order's files into the batch folder (posbias.rerank.save_order),
where the rules downstream read them (posbias.paths.in_batch)."""

import time

from tqdm import tqdm

from posbias import hub, rerankers, schemas
from posbias.data.collection import grades_by_query
from posbias.jobs import logged
from posbias.models import require_causal_lm
from posbias.partial import PartialFolder, digest
from posbias.rerank import ORDER_FILES, Experiment, rerank_order, save_order

sm = snakemake  # noqa: F821
rr, seed, debias = sm.params.settings, sm.params.seed, sm.wildcards.debias  # rr: only the keys this job reads
with logged(sm, "rerank") as log:
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    data = Experiment(sm.wildcards.dataset, schemas.read(sm.input.run, "run"),
                      schemas.read(sm.input.queries, "queries"), schemas.read(sm.input.corpus, "corpus"), grades)
    # orders finished before a preemption or a failed attempt (same params, inputs and code) are kept;
    # the stats file is written last, so it marks a finished order
    folder = PartialFolder(sm.output[0], digest(dict(sm.params.items()), list(sm.input)))
    pending = [name for name in sm.params.orders if not folder.done(f"{name}{ORDER_FILES['stats']}")]
    if folder.resumed:
        log.info("%d orders kept from an interrupted run of this job", folder.resumed)
    if pending:  # the model loads only if there is something to rerank
        hub.require(sm.params.model_path, f"models.{sm.wildcards.model}.path")
        if sm.params.model["kind"] == "causal_lm":
            require_causal_lm(sm.params.model_path, f"models.{sm.wildcards.model}.path",
                                  sm.params.model.get("trust_remote_code", False))
        start = time.perf_counter()
        base = rerankers.build(sm.params.model, sm.params.model_path, grades, seed, sm.params.device,
                               rr.get("word_budget"))
        log.info("loaded %s in %.1f s; %d orders to rerank", sm.wildcards.model, time.perf_counter() - start,
                 len(pending))
    for name in tqdm(pending, desc=f"rerank {sm.wildcards.model} {debias}", unit="order"):
        start = time.perf_counter()
        result = rerank_order(base, name, debias, rr, seed, data, sm.params.model["batch_size"])
        paths = {key: folder.path(f"{name}{suffix}") for key, suffix in ORDER_FILES.items()}
        save_order(paths, name, debias, f"{sm.wildcards.model}.{debias}", result, time.perf_counter() - start,
                   base.stats, rr, log)
    folder.finish()
