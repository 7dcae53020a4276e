"""Score one pointwise scorer on the pool-replacement design and summarise it per query (posbias.pool)."""

import torch

from posbias import orders, pool, rerankers, schemas
from posbias.data.collection import grades_by_query
from posbias.jobs import logged
from posbias.rerank import present_candidates

sm = snakemake  # noqa: F821
p = sm.params.pool
with logged(sm, "pool_design") as log:
    torch.set_num_threads(sm.threads)  # the job's CPUs (two jobs share 2 CPUs without oversubscribing)
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    shown = present_candidates(schemas.read(sm.input.run, "run"), schemas.read(sm.input.queries, "queries"),
                               schemas.read(sm.input.corpus, "corpus"), grades, orders.parse("original"),
                               sm.params.seed, p["depth"], None, None, p.get("queries"))
    cells, skipped = pool.design(shown.lists, sm.params.window, p["kept"], p["pools"], p["orders"], sm.params.seed)
    if skipped:
        log.warning("%d queries have fewer than %d candidates beyond the %d kept; left out", len(skipped),
                    sm.params.window - p["kept"], p["kept"])
    scorer = rerankers.build(sm.params.model, sm.params.model_path, grades, sm.params.seed, sm.params.device,
                             sm.params.word_budget)
    scores = pool.score(scorer, shown.lists, cells, sm.params.model["batch_size"])
    keys = {"model": sm.wildcards.model, "dataset": sm.wildcards.dataset, "retriever": sm.wildcards.retriever}
    table = pool.summarise(scores, p["kept"], keys)
    schemas.write(table, sm.output[0], "pool")
    log.info("%d queries, %d windows: Pool-PSI %.3f; variance document %.4f, companions %.4f, order %.4f",
             table.height, len(cells), table["pool_psi"].mean(), table["document"].mean(), table["companions"].mean(),
             table["order"].mean())
