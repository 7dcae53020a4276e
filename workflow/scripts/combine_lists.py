"""A list-level debiasing method (PermSC@K: the reranked shuffled-0 … shuffled-(K-1) lists aggregated):
its registry entry's combine step over the reranked lists it reads, into one ranking.

No model call; the cost and stats are those of the reranking passes it combines."""

import json
from pathlib import Path

from posbias import atomic, debias, orders, runs, schemas
from posbias.debias import list_level
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "permsc_lists") as log:
    run = debias.combine(sm.wildcards.debias, [schemas.read(p, "run") for p in sm.params.runs], sm.params.settings)
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, f"{sm.wildcards.model}.{sm.wildcards.debias}")
    schemas.write(list_level.summed_costs([schemas.read(p, "cost") for p in sm.params.costs]), sm.output.cost, "cost")
    parts = [json.loads(Path(p).read_text()) for p in sm.params.stats]
    stats = {"order": orders.ORIGINAL, "debias": sm.wildcards.debias, "aggregated_orders": [s["order"] for s in parts],
             **sm.params.settings, "queries": run["query_id"].n_unique(),
             **{key: sum(s.get(key, 0) for s in parts) for key in ("windows", "wall_seconds", "parse_failures",
                                                                   "missing_ids", "truncated_passages")}}
    atomic.write_text(sm.output.stats, json.dumps(stats, indent=1, sort_keys=True))
    log.info("%s over %d reranked lists (%s) for %d queries", sm.wildcards.debias, len(parts), sm.params.settings,
             stats["queries"])
