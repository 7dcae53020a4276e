"""Score one pointwise scorer on the pool-replacement design and summarise it per query (posbias.pool)."""

from posbias import pool, rerankers, schemas
from posbias.data.collection import grades_by_query
from posbias.jobs import logged

sm = snakemake  # noqa: F821
p, window = sm.params.pool, sm.params.model["grade_window"]
with logged(sm, "pool_design") as log:
    grades = grades_by_query(schemas.read(sm.input.qrels, "qrels"))
    lists, cells, skipped = pool.layout(schemas.read(sm.input.run, "run"), schemas.read(sm.input.queries, "queries"),
                                        schemas.read(sm.input.corpus, "corpus"), grades, p, window, sm.params.seed)
    if skipped:
        log.warning("%d queries have fewer than %d candidates beyond the %d kept; left out", len(skipped),
                    window - p["kept"], p["kept"])
    scorer = rerankers.build(sm.params.model, sm.params.model_path, grades, sm.params.seed, sm.params.device,
                             sm.params.word_budget)
    scores, cost = pool.score(scorer, lists, cells, sm.params.model["batch_size"])
    keys = {"model": sm.wildcards.model, "dataset": sm.wildcards.dataset, "retriever": sm.wildcards.retriever}
    table = pool.summarise(scores, p["kept"], keys)
    schemas.write(table, sm.output.table, "pool")
    schemas.write(cost, sm.output.cost, "cost")
    log.info("%d queries, %d windows: Pool-PSI %.3f; variance document %.4f, companions %.4f, order %.4f",
             table.height, len(cells), table["pool_psi"].mean(), table["document"].mean(), table["companions"].mean(),
             table["order"].mean())
