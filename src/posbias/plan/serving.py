"""What serving a scorer costs per query with an inference-time permutation budget, planned before the run:
BSC@K / PermSC@K (K presentations) and their adaptive versions (:mod:`posbias.debias.adaptive`).

One presentation's calls and prompt tokens per query come from the plan's counted shuffled orders of the
scorer's experiment (exact where those counts are). K presentations cost K times that, exactly. An adaptive
budget stops after between ``patience`` + 1 and K draws depending on how much the model's aggregate moves,
which is known only after the run (the stability table measures it), so the plan gives its range and marks
it as an estimate; its expected cost is the frontier table's measured calls.
"""

from __future__ import annotations

import polars as pl

from posbias import config as pbconfig
from posbias import orders as pborders
from posbias.debias import shuffle_combine
from posbias.debias.adaptive import ADAPTIVE, FIXED, label
from posbias.rerankers import modes

SCHEMA = {"model": pl.String, "dataset": pl.String, "retriever": pl.String, "method": pl.String, "k": pl.Int64,
          "budget": pl.String, "calls_min": pl.Float64, "calls_max": pl.Float64, "tokens_min": pl.Float64,
          "tokens_max": pl.Float64, "exact": pl.Boolean}


def settings(config: dict) -> dict:
    """What the serving plan reads of a prepared config (the plan rule's ``serving`` param): the stability
    targets of debias none with their family, the fixed Ks (``ocsft.bsc_k``) and ``ocsft.adaptive``."""
    targets: dict[tuple[str, str, str], dict] = {}
    for m, d, r, method in pbconfig.stability_targets(config):
        variant = pbconfig.variant_of(config["training"], m)  # a training entry's seeds cost the same: one row
        if method == "none" and (variant, d, r) not in targets:
            targets[(variant, d, r)] = {"model": m, "variant": variant, "dataset": d, "retriever": r,
                                        "family": modes.family(config["models"][m])}
    return {"targets": list(targets.values()), "ks": config["ocsft"]["bsc_k"], "adaptive": config["ocsft"]["adaptive"]}


def serving(orders: pl.DataFrame, targets: list[dict], ks: list[int], adaptive: dict) -> pl.DataFrame:
    """Per target (``model``, ``dataset``, ``retriever``, ``family``: a stability target of debias none; its
    ``variant``, the training entry of a seeded model, names the row) and
    budget, the calls and tokens per query of serving it (schema :data:`SCHEMA`): fixed K for each K > 1
    in ``ks`` (min = max), adaptive for each cap in ``adaptive["caps"]`` (from ``patience`` + 1 to K
    draws; never exact). Targets whose shuffled orders the plan did not count are left out."""
    rows = []
    shuffled = orders.filter((pl.col("family") == "rerank") & (pl.col("debias") == "none")
                             & pl.col("order").str.starts_with(pborders.prefix("shuffled")))
    for t in targets:
        part = shuffled.filter((pl.col("model") == t["model"]) & (pl.col("dataset") == t["dataset"])
                               & (pl.col("retriever") == t["retriever"]))
        if part.is_empty():
            continue
        calls = float((part["calls"] / part["queries"]).mean())
        tokens = float((part["prompt_tokens"] / part["queries"]).mean())
        exact = bool(part["calls_exact"].all() and part["tokens_exact"].all())
        combine = shuffle_combine(t["family"])
        keys = {"model": t.get("variant", t["model"]), "dataset": t["dataset"], "retriever": t["retriever"]}
        for k in sorted(k for k in ks if k > 1):
            rows.append({**keys, "method": label(combine, k, FIXED), "k": k, "budget": FIXED, "calls_min": k * calls,
                         "calls_max": k * calls, "tokens_min": k * tokens, "tokens_max": k * tokens, "exact": exact})
        floor = adaptive["patience"] + 1
        for cap in sorted(adaptive["caps"]):
            rows.append({**keys, "method": label(combine, cap, ADAPTIVE), "k": cap, "budget": ADAPTIVE,
                         "calls_min": min(floor, cap) * calls, "calls_max": cap * calls,
                         "tokens_min": min(floor, cap) * tokens, "tokens_max": cap * tokens, "exact": False})
    return pl.DataFrame(rows, schema=SCHEMA)


def serving_table(rows: pl.DataFrame):
    """The serving plan as a :class:`posbias.paper.writers.Table`; a range with ~ marks an adaptive budget."""
    from posbias.paper.writers import Table

    def cell(low: float, high: float, exact: bool) -> str:
        if low == high:
            return f"{low:,.1f}" if exact else f"~{low:,.1f}"
        return f"~{low:,.1f}–{high:,.1f}"

    view = pl.DataFrame([{
        "model": r["model"], "dataset": f"{r['dataset']} · {r['retriever']}", "method": r["method"],
        "calls/query": cell(r["calls_min"], r["calls_max"], r["exact"]),
        "prompt tokens/query": cell(r["tokens_min"], r["tokens_max"], r["exact"]),
    } for r in rows.iter_rows(named=True)], schema={c: pl.String for c in ("model", "dataset", "method", "calls/query",
                                                                              "prompt tokens/query")})
    notes = ("Serving one query with K presentations (BSC@K: a pointwise scorer's scores averaged; PermSC@K: a "
             "listwise model's reranked lists aggregated) costs K × one presentation's calls and prompt tokens, "
             "counted by the plan on the experiment's shuffled orders. An adaptive budget (ocsft.adaptive) stops "
             "once the aggregate's top set settles: between patience + 1 and K draws, known only after the run "
             "(the frontier table's calls/query is the measured cost); ~ marks an estimate or a range.")
    return Table(rows, view, notes)
