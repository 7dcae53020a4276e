"""The papers' directional claims, checked on every model a run reranks: the reproduction table's second section.

The matrix (:mod:`posbias.reproduction.matrix`) compares the papers' *figures* with the run where the run has
the papers' collections and models. A claim is a direction the papers state ("shuffling lowers quality",
"late positions lose", …) that any model can be tested on: each :class:`Claim` names its paper, its verbatim
quote, what in a run tests it (our reading: the papers state the direction, not this test), and reads one
experiment's per-query metrics. A claim **holds** where a one-sided paired Wilcoxon signed-rank test over
queries (scipy) rejects "no difference" at α = 0.05 in the stated direction, **fails** otherwise (the effect
says whether the run went the other way or nowhere), and is **not run** where the experiment lacks the
orders or methods it needs. The effect is the mean paired difference (positive: the claimed direction) and
d_z, that mean over the differences' standard deviation. Real models read whatever they read: nothing here
is tuned to make a claim hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from posbias import debias, orders

MEASURE = "nDCG@10"
ALPHA = 0.05
HOLDS, FAILS, NOT_RUN = "holds", "fails", "not run"


@dataclass(frozen=True)
class Claim:
    """One directional claim: where it is stated, verbatim, and how a run tests it (``pairs``: an
    experiment's per-query metrics by debias method → per query (claimed better, claimed worse), or the
    reason it cannot be tested)."""

    id: str
    paper: str
    quote: str
    reading: str
    pairs: Callable[[dict[str, pl.DataFrame]], tuple[list[float], list[float], str] | str]


def _values(frame: pl.DataFrame, order_test: Callable[[str], bool]) -> pl.DataFrame:
    """Per query and order, the measure's value on the orders ``order_test`` accepts."""
    accepted = [o for o in frame["order"].unique().to_list() if order_test(o)]
    return frame.filter((pl.col("measure") == MEASURE) & pl.col("order").is_in(accepted))


def _per_query(frame: pl.DataFrame, order_test: Callable[[str], bool]) -> dict[str, float]:
    """Per query, the mean of the measure over the accepted orders."""
    values = _values(frame, order_test).group_by("query_id", maintain_order=True).agg(pl.col("value").mean())
    return dict(zip(values["query_id"], values["value"]))


def _paired(better: dict[str, float], worse: dict[str, float], what: str):
    queries = sorted(set(better) & set(worse))
    return [better[q] for q in queries], [worse[q] for q in queries], what


def _is_shuffled(order: str) -> bool:
    return orders.is_kind(order, "shuffled")


def _presented(order: str) -> bool:
    return order == orders.ORIGINAL or _is_shuffled(order)


def shuffling_lowers_quality(metrics):
    plain = metrics.get("none")
    if plain is None or not any(_is_shuffled(o) for o in plain["order"].unique()):
        return "no shuffled order"
    return _paired(_per_query(plain, lambda o: o == orders.ORIGINAL), _per_query(plain, _is_shuffled),
                   "original order vs the mean over shuffled orders")


def late_positions_lose(metrics):
    plain = metrics.get("none")
    positions = sorted({orders.index_of(o) for o in plain["order"].unique() if orders.is_kind(o, "position")}) \
        if plain is not None else []
    if len(positions) < 2:
        return "fewer than two position orders"
    first, last = orders.position(positions[0]), orders.position(positions[-1])
    return _paired(_per_query(plain, lambda o: o == first), _per_query(plain, lambda o: o == last),
                   f"relevant passage at input position {positions[0]} vs {positions[-1]}")


def _claimed(metrics, claim: str) -> list[tuple[debias.DebiasSpec, str]]:
    """The experiment's debiasing methods whose registry entry names ``claim`` (``DebiasMethod.claim``)."""
    specs = {m: debias.parse(m) for m in metrics if m != "none"}
    return [(spec, m) for m, spec in specs.items() if debias.DEBIAS_METHODS[spec.method].claim == claim]


def permsc_beats_one_list(metrics):
    """The list-level aggregation (PermSC@K over K reranked shuffled lists) of the largest K against one list."""
    aggregations = sorted((spec.k, m) for spec, m in _claimed(metrics, "permsc-beats-one-list") if spec.k > 1)
    if not aggregations or "none" not in metrics:
        return "no aggregation over K > 1 reranked lists"
    name = aggregations[-1][1]
    aggregated = _per_query(metrics[name], lambda o: o == orders.ORIGINAL)
    single = _per_query(metrics["none"], _is_shuffled)
    return _paired(aggregated, single, f"{name} vs one reranked shuffled list (mean over them)")


def capcal_lifts_quality(metrics):
    """CapCal as the paper runs it (the entropy-adaptive α: the method without a variant) against the plain reading."""
    paper = [m for spec, m in _claimed(metrics, "capcal-lifts-quality") if spec.variant is None]
    if not paper or "none" not in metrics:
        return "no CapCal (the paper's α)"
    return _paired(_per_query(metrics[paper[0]], _presented), _per_query(metrics["none"], _presented),
                   "CapCal vs plain, mean over the original and shuffled orders")


CLAIMS = (
    Claim("shuffling-lowers-quality", "DebiasFirst",
          "Unlike the baselines, whose performance reduces with randomized passage order",
          "nDCG@10 in the first-stage order is above its mean over shuffled orders", shuffling_lowers_quality),
    Claim("late-positions-lose", "DebiasFirst",
          "the baselines falter when the relevant passage appears later in the list",
          "nDCG@10 with the relevant passage at the first measured input position is above that at the last",
          late_positions_lose),
    Claim("permsc-beats-one-list", "DebiasFirst",
          "Results show PermSC rank aggregation (green line) can still improve performance of DebiasFirst (green "
          "bar), but the improvement becomes less.",
          "PermSC over the largest K of reranked shuffled lists is above one such list (for any model: the quote "
          "says it still helps a debiased one)", permsc_beats_one_list),
    Claim("capcal-lifts-quality", "CapCal", "在所有测试架构和规模上均取得了稳健的性能提升",
          "nDCG@10 with CapCal (the entropy-adaptive α) is above the plain reading, over the original and "
          "shuffled orders", capcal_lifts_quality),
)


def wilcoxon_greater(better: list[float], worse: list[float]) -> float:
    """One-sided p of the Wilcoxon signed-rank test that ``better − worse`` is positive (1.0 where every
    difference is zero: no evidence either way)."""
    from scipy.stats import wilcoxon

    differences = [b - w for b, w in zip(better, worse)]
    if not any(differences):
        return 1.0
    return float(wilcoxon(differences, alternative="greater").pvalue)


def check(claim: Claim, metrics: dict[str, pl.DataFrame]) -> dict:
    """One claim on one experiment: mark, queries, effect (mean paired difference, d_z) and p."""
    found = claim.pairs(metrics)
    if isinstance(found, str):
        return {"mark": NOT_RUN, "queries": 0, "effect": math.nan, "d_z": math.nan, "p": math.nan,
                "compared": "", "note": found}
    better, worse, compared = found
    if len(better) < 2:
        return {"mark": NOT_RUN, "queries": len(better), "effect": math.nan, "d_z": math.nan, "p": math.nan,
                "compared": compared, "note": "fewer than two queries to pair"}
    differences = [b - w for b, w in zip(better, worse)]
    mean = sum(differences) / len(differences)
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (len(differences) - 1))
    p = wilcoxon_greater(better, worse)
    holds = p < ALPHA and mean > 0
    if mean > 0:  # the claimed direction; where not significant, say how small a p the queries allow
        moved = sum(d != 0 for d in differences)  # the signed-rank test drops ties at zero
        note = "" if holds else f"not significant (the smallest p {moved} queries that differ allow: {2.0 ** -moved:.3g})"
    else:
        note = "the other way" if mean < 0 else "no difference"
    return {"mark": HOLDS if holds else FAILS, "queries": len(better), "effect": mean,
            "d_z": mean / sd if sd > 0 else math.nan, "p": p, "compared": compared, "note": note}


def evaluate(experiments: dict[tuple[str, str, str], dict[str, pl.DataFrame]]) -> list[dict]:
    """Every claim on every experiment (model, dataset, retriever) → its per-query metrics by debias method."""
    rows = []
    for (model, dataset, retriever), metrics in sorted(experiments.items()):
        for claim in CLAIMS:
            rows.append({"claim": claim.id, "paper": claim.paper, "model": model, "dataset": dataset,
                         "retriever": retriever, **check(claim, metrics)})
    return rows


def experiments_of(summaries: list[tuple[str, str, str, str]]) -> dict[tuple[str, str, str], dict[str, str]]:
    """The rule's grouping: (model, dataset, retriever) → {debias method: its per-query metrics file}."""
    from posbias import paths

    grouped: dict[tuple[str, str, str], dict[str, str]] = {}
    for model, dataset, retriever, method in summaries:
        grouped.setdefault((model, dataset, retriever), {})[method] = paths.rerank_metrics(model, dataset, retriever,
                                                                                           method)
    return grouped


def table(rows: list[dict]):
    """The claims as a :class:`~posbias.paper.writers.Table`: numbers in the CSV, marks in the view."""
    from posbias.paper.writers import Table, fmt, view_or_none

    data = pl.DataFrame(rows, schema_overrides={"effect": pl.Float64, "d_z": pl.Float64, "p": pl.Float64})
    view = [{"claim": r["claim"], "model": r["model"], "dataset / first stage": f"{r['dataset']} / {r['retriever']}",
             "compared": r["compared"] or "–", "queries": r["queries"], "effect (mean diff.)": fmt(r["effect"]),
             "d_z": fmt(r["d_z"], 2), "p (one-sided)": fmt(r["p"], 4),
             "mark": r["mark"] + (f": {r['note']}" if r["note"] else "")} for r in rows if r["mark"] != NOT_RUN]
    counts = {m: sum(r["mark"] == m for r in rows) for m in (HOLDS, FAILS, NOT_RUN)}
    said = "; ".join(f"{c.id} ({c.paper}): “{c.quote}” (tested: {c.reading})" for c in CLAIMS)
    notes = (f"claims: {counts[HOLDS]} hold, {counts[FAILS]} fail, {counts[NOT_RUN]} not run (left out above; the "
             f"CSV lists them with the reason). A claim holds where a one-sided paired Wilcoxon signed-rank test "
             f"over queries rejects no difference at α = {ALPHA} in the stated direction; effect: the mean paired "
             f"difference of {MEASURE} (positive: the claimed direction); d_z: that mean over the differences' "
             f"standard deviation. The claims, verbatim, and how this run tests each (ours): {said}.")
    return Table(data=data, view=view_or_none(view, "claim", "no experiment of this run can test a claim"),
                 notes=notes)
