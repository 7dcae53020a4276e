"""Quality and decision stability (τ-PSI, retention Jaccard; BSC@K or PermSC@K) of one scorer."""

import polars as pl

from posbias import orders, schemas, stability
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "stability") as log:
    presented = [orders.ORIGINAL, *(o for o in sm.params.orders if orders.is_kind(o, "shuffled"))]
    runs = dict(zip(sm.params.orders, sm.params.runs))
    plain = dict(zip(sm.params.orders, sm.params.plain))  # a debiasing method's plain runs (else empty)
    costs = pl.concat([schemas.read(p, "cost") for p in sm.params.costs])
    table, per_query = stability.stability_table(
        schemas.read(runs[orders.ORIGINAL], "run"),
        [schemas.read(runs[o], "run") for o in presented[1:]],
        schemas.read(sm.input.qrels, "qrels"), sm.params.relevant_grade, sm.params.ocsft["bsc_k"],
        {"model": sm.wildcards.model, "dataset": sm.wildcards.dataset, "retriever": sm.wildcards.retriever,
         "debias": sm.wildcards.debias, "family": sm.params.combine["family"]},
        {c: float(costs[c].mean()) for c in ("calls", "prompt_tokens", "seconds")}, sm.params.ocsft["grid_points"],
        sm.params.ocsft["presentations"], sm.params.combine["combine"], sm.params.combine.get("aggregation"),
        [schemas.read(plain[o], "run") for o in presented] if plain else None, sm.params.ocsft["adaptive"])
    schemas.write(table, sm.output.table, "stability")
    schemas.write(per_query, sm.output.queries, "stability_queries")
    log.info("\n%s", table)
