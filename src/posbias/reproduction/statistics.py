"""How a run computes each kind of figure the papers report: one :class:`Statistic` per kind.

A figure's condition is first *bound* to the run (:func:`posbias.reproduction.matrix.bind`): its
collections become ``cells`` (the run's dataset and retriever for each), its model the ``models`` (the
seed models of one variant), and each ``versus`` entry (the condition with some fields changed: the
system compared against) a bound condition of its own. A statistic names the result files a bound
condition needs (:meth:`Statistic.files`, so the rule declares them as inputs) and computes the figure
from the rows of those files, one value per seed model (the matrix reports mean ± sd over them).
Values are in the run's units; ``power`` says how the figure's ``scale`` applies (0 for counts,
1 for values, 2 for a variance).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from posbias import debias, orders
from posbias.debias.adaptive import FIXED
from posbias.paper.pool_figures import pool_summary
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.reproduction.files import (
    AGGREGATE_PER_RUN,
    aggregate_files,
    list_level,
    of_kind,
    systems,
    wins_files,
)


class NotRun(Exception):
    """The run holds no results for the condition; the message says what is missing."""


@dataclass(frozen=True)
class Measured:
    """A statistic's values (one per seed model of the condition's model) and what they are over."""

    values: list[float]
    note: str = ""


@dataclass(frozen=True)
class Statistic:
    """One kind of figure: the results it reads, the condition fields it takes, how it computes."""

    source: str
    fields: tuple[str, ...]
    optional: tuple[str, ...]
    compute: Callable[[pl.DataFrame, dict], Measured]
    files: Callable[[dict, set[str]], list[str]]
    power: int = 1

    def check(self, condition: dict) -> str | None:
        """None, or what is wrong with a condition's fields (one line)."""
        missing = [f for f in self.fields if f not in condition]
        unknown = [f for f in condition if f not in self.fields + self.optional]
        if missing:
            return f"missing {', '.join(missing)} (this statistic takes {', '.join(self.fields + self.optional)})"
        if unknown:
            return f"unknown field {', '.join(unknown)} (this statistic takes {', '.join(self.fields + self.optional)})"
        return None


# ---- rows of one system ------------------------------------------------------------------------------

def _rows(frame: pl.DataFrame, model: str | None, cell: tuple[str, str], **equal) -> pl.DataFrame:
    dataset, retriever = cell
    keep = (pl.col("dataset") == dataset) & (pl.col("retriever") == retriever)
    if model is not None:
        keep &= pl.col("model") == model
    for column, value in equal.items():
        keep &= pl.col(column) == value
    return frame.filter(keep)


def per_shuffle(frame: pl.DataFrame, model: str, cell: tuple[str, str], debias: str, measure: str) -> dict[int, float]:
    """Mean ``measure`` over queries per shuffle seed (orders ``shuffled-<seed>``)."""
    rows = _rows(frame, model, cell, debias=debias, measure=measure).filter(pl.col("order").str.starts_with(orders.prefix("shuffled")))
    means = rows.group_by("order", maintain_order=True).agg(pl.col("value").mean()).with_columns(
        seed=pl.col("order").str.split("-").list.get(1).cast(pl.Int64))
    return dict(zip(means["seed"].to_list(), means["value"].to_list()))


def system_value(frame: pl.DataFrame, model: str, cell: tuple[str, str], debias: str, order: str, measure: str) -> float:
    """A reranked system's mean ``measure`` on one cell: over queries in the original order, or over
    shuffle seeds of the means over queries (``order: shuffled``)."""
    if order == "shuffled":
        seeds = per_shuffle(frame, model, cell, debias, measure)
        if not seeds:
            raise NotRun(f"{model} has no shuffled orders with {debias} on {cell[0]}")
        return float(np.mean(list(seeds.values())))
    rows = _rows(frame, model, cell, debias=debias, measure=measure, order=order)
    if rows.is_empty():
        raise NotRun(f"{model} has no {order} order with {debias} on {cell[0]} for {measure}")
    return float(rows["value"].mean())


def _mean(values: list[float]) -> float:
    """The mean over a system's seed models (:func:`posbias.paper.stats.mean_sd`)."""
    return mean_sd(values)[0]


def _across_cells(bound: dict, one: Callable[[str, tuple[str, str]], float]) -> list[float]:
    """Per seed model of the condition, the mean over its cells of ``one(model, cell)``."""
    return [float(np.mean([one(m, cell) for cell in bound["cells"]])) for m in bound["models"]]


# ---- the statistics ---------------------------------------------------------------------------------

def first_stage(frame: pl.DataFrame, bound: dict) -> Measured:
    """A first-stage run's mean ``measure`` over queries (mean over cells where there are several)."""
    values = []
    for dataset, retriever in bound["cells"]:
        rows = frame.filter((pl.col("dataset") == dataset) & (pl.col("system") == retriever)
                            & (pl.col("measure") == bound["measure"]))
        if rows.is_empty():
            raise NotRun(f"{bound['measure']} is not among the run's evaluation.measures")
        values.append(float(rows["value"].mean()))
    queries = frame.filter(pl.col("measure") == bound["measure"])["query_id"].n_unique()
    return Measured([float(np.mean(values))], f"{queries} queries")


def rerank(frame: pl.DataFrame, bound: dict) -> Measured:
    """A reranked system's mean measure (original order, or the mean over shuffle seeds), averaged over
    the condition's collections."""
    values = _across_cells(bound, lambda m, c: system_value(frame, m, c, bound["debias"], bound["order"], bound["measure"]))
    return Measured(values, _over(bound))


def _over(bound: dict) -> str:
    cells = len(bound["cells"])
    seeds = len(bound["models"])
    return ", ".join(p for p in (f"mean of {cells} collections" if cells > 1 else "",
                                 f"{seeds} seeds" if seeds > 1 else "") if p)


def _other(frame: pl.DataFrame, versus: dict, cell: tuple[str, str], default: dict) -> float:
    """The compared system's value on one cell, averaged over its seeds."""
    return _mean([system_value(frame, m, cell, versus["debias"], versus.get("order", default["order"]),
                                    versus.get("measure", default["measure"])) for m in versus["models"]])


def rerank_gain(frame: pl.DataFrame, bound: dict) -> Measured:
    """The system's mean measure minus the ``versus`` system's (one), averaged over collections."""
    versus, = bound["versus"]
    values = _across_cells(bound, lambda m, c: system_value(frame, m, c, bound["debias"], bound["order"], bound["measure"])
                           - _other(frame, versus, c, bound))
    return Measured(values, _over(bound))


def rerank_wins(frame: pl.DataFrame, bound: dict) -> Measured:
    """In how many units the system beats every ``versus`` system: ``units: datasets`` counts the
    collections where its mean is higher (``significant: true``: and a paired Wilcoxon test over
    queries, Holm-corrected over collections × compared systems, says so at 0.05); ``units: shuffles``
    counts the shuffle seeds of one collection where its mean beats the compared system's on the same
    seed, or the compared system's one value where that has no shuffled orders (PermSC over the
    shuffles: one aggregated list), or at seed s its PermSC over the first s + 1 shuffles
    (:data:`PERMSC_PER_RUN`)."""
    values, units = [], 0
    for model in bound["models"]:
        if bound["units"] == "shuffles":
            (cell,) = bound["cells"]
            mine = per_shuffle(frame, model, cell, bound["debias"], bound["measure"])
            if not mine:
                raise NotRun(f"{model} has no shuffled orders on {cell[0]}")
            others = [_versus_per_shuffle(frame, v, cell, bound["measure"], mine) for v in bound["versus"]]
            wins = sum(all(mine[s] > o[s] for o in others) for s in mine)
            units = len(mine)
        else:
            wins, units = _dataset_wins(frame, model, bound)
        values.append(float(wins))
    return Measured(values, f"of {units} {bound['units']}" + (f", {len(values)} seeds" if len(values) > 1 else ""))


def _versus_per_shuffle(frame, versus, cell, measure, mine) -> dict[int, float]:
    seeds = {}
    for model in versus["models"]:
        if versus["debias"] == AGGREGATE_PER_RUN:  # seed s: the aggregate over shuffles 0 … s (K = 1: shuffle 0)
            by_k = {1: per_shuffle(frame, model, cell, "none", measure).get(0), **_aggregates(frame, model, cell, measure)}
            own = {s: by_k[s + 1] for s in mine if by_k.get(s + 1) is not None}
        else:
            own = per_shuffle(frame, model, cell, versus["debias"], measure) or {
                s: system_value(frame, model, cell, versus["debias"], orders.ORIGINAL, measure) for s in mine}
        for s, v in own.items():
            seeds.setdefault(s, []).append(v)
    if set(mine) - set(seeds):
        raise NotRun(f"{versus['models'][0]} lacks shuffle seeds {sorted(set(mine) - set(seeds))}")
    return {s: _mean(v) for s, v in seeds.items()}


def _per_query(frame, model, cell, debias, order, measure) -> dict[str, float]:
    rows = _rows(frame, model, cell, debias=debias, measure=measure)
    rows = rows.filter(pl.col("order").str.starts_with(orders.prefix("shuffled"))) if order == "shuffled" else rows.filter(pl.col("order") == order)
    if rows.is_empty():
        raise NotRun(f"{model} has no {order} order with {debias} on {cell[0]}")
    means = rows.group_by("query_id", maintain_order=True).agg(pl.col("value").mean())
    return dict(zip(means["query_id"].to_list(), means["value"].to_list()))


def _dataset_wins(frame, model, bound) -> tuple[int, int]:
    better, pvalues = [], []
    for cell in bound["cells"]:
        mine = _per_query(frame, model, cell, bound["debias"], bound["order"], bound["measure"])
        beats = []
        for versus in bound["versus"]:
            theirs = [_per_query(frame, m, cell, versus["debias"], bound["order"], bound["measure"]) for m in versus["models"]]
            queries = sorted(mine)
            a = np.array([mine[q] for q in queries])
            b = np.array([np.mean([t.get(q, 0.0) for t in theirs]) for q in queries])
            beats.append(a.mean() > b.mean())
            pvalues.append(paired_pvalue(a, b))
        better.append(all(beats))
    if bound.get("significant"):
        adjusted = holm(pvalues)
        per_cell = len(bound["versus"])
        sig = [all(not math.isnan(p) and p < ALPHA for p in adjusted[i * per_cell:(i + 1) * per_cell])
               for i in range(len(bound["cells"]))]
        better = [b and s for b, s in zip(better, sig)]
    return sum(better), len(bound["cells"])


def rerank_variance(frame: pl.DataFrame, bound: dict) -> Measured:
    """The variance (n − 1) over shuffle seeds of the system's per-seed mean measure, on one collection."""
    (cell,) = bound["cells"]
    values = []
    for model in bound["models"]:
        seeds = per_shuffle(frame, model, cell, bound["debias"], bound["measure"])
        if len(seeds) < 2:
            raise NotRun(f"{model} has fewer than 2 shuffled orders on {cell[0]}")
        values.append(float(np.var(list(seeds.values()), ddof=1)))
    return Measured(values, f"over {len(seeds)} shuffle seeds")


def _aggregates(frame: pl.DataFrame, model: str, cell: tuple[str, str], measure: str) -> dict[int, float]:
    """The system's mean ``measure`` of each list-level aggregate over K reranked shuffles, by K."""
    return {debias.parse(m).k: system_value(frame, model, cell, m, orders.ORIGINAL, measure)
            for m in _rows(frame, model, cell)["debias"].unique().to_list() if list_level(m)}


def permsc_peak(frame: pl.DataFrame, bound: dict) -> Measured:
    """The number of permutations K at which PermSC peaks on one collection: K = 1 is one pass over a
    shuffled list (the mean over shuffle seeds), K > 1 list-level PermSC@K (its aggregated list)."""
    (cell,) = bound["cells"]
    values, ks = [], []
    for model in bound["models"]:
        by_k = {1: system_value(frame, model, cell, "none", "shuffled", bound["measure"]),
                **_aggregates(frame, model, cell, bound["measure"])}
        if len(by_k) < 2:
            raise NotRun(f"{model} has no list-level PermSC@K on {cell[0]}")
        ks = sorted(by_k)
        values.append(float(max(ks, key=lambda k: (by_k[k], -k))))
    return Measured(values, f"K in {ks[0]}…{ks[-1]}")


def _stability(frame: pl.DataFrame, model: str, cell, bound: dict, column: str) -> float:
    rows = _rows(frame, model, cell, debias=bound.get("debias", "none"), k=bound.get("k", 1), budget=FIXED)
    if rows.is_empty():
        raise NotRun(f"{model} has no stability row at K = {bound.get('k', 1)} on {cell[0]}")
    return float(rows[column].mean())


def stability(frame: pl.DataFrame, bound: dict) -> Measured:
    """A scorer's decision-stability column (τ-PSI, retention Jaccard, nDCG@10 over presentations, tie
    rate, top-10 instability …) at K (1: the plain scorer; K > 1: BSC@K), averaged over collections."""
    return Measured(_across_cells(bound, lambda m, c: _stability(frame, m, c, bound, bound["column"])), _over(bound))


def stability_gain(frame: pl.DataFrame, bound: dict) -> Measured:
    """A stability column of the scorer minus the ``versus`` scorer's, averaged over collections (the
    pooled gain over (base, collection) cells when several collections are given)."""
    versus, = bound["versus"]
    return Measured(_across_cells(bound, lambda m, c: _stability(frame, m, c, bound, bound["column"])
                                  - _mean([_stability(frame, o, c, versus, bound["column"]) for o in versus["models"]])),
                    _over(bound))


def stability_spread(frame: pl.DataFrame, bound: dict) -> Measured:
    """The largest minus the smallest of several scorers' stability column (each the mean over its
    seeds and the collections)."""
    means = [_mean(_across_cells(s, lambda m, c, s=s: _stability(frame, m, c, s, bound["column"])))
             for s in systems(bound)]
    return Measured([max(means) - min(means)], f"over {len(means)} scorers")


def decisions(frame: pl.DataFrame, bound: dict) -> Measured:
    """A consumer's mean quality or flip rate over queries (``column``: quality, flip, verdict_flip)."""
    def one(model, cell):
        rows = _rows(frame, model, cell)
        if rows.is_empty():
            raise NotRun(f"{model} has no decisions on {cell[0]}")
        return float(rows[bound["column"]].mean())
    return Measured(_across_cells(bound, one), _over(bound))


def pool(frame: pl.DataFrame, bound: dict) -> Measured:
    """Pool-PSI or a share of the variance decomposition (:func:`posbias.paper.pool_figures.pool_summary`:
    ``companion_coupling``, ``slot_effect``, ``residual_vs_reference`` against ``versus``'s scorer)."""
    reference = bound["versus"][0]["models"][0] if bound.get("versus") else None
    summary = pool_summary(frame, {m: m for m in frame["model"].unique().to_list()}, reference)

    def one(model, cell):
        rows = summary.filter((pl.col("variant") == model) & (pl.col("dataset") == cell[0]) & (pl.col("retriever") == cell[1]))
        if rows.is_empty():
            raise NotRun(f"{model} has no pool design on {cell[0]}")
        return float(rows[bound["column"]][0])
    return Measured(_across_cells(bound, one), _over(bound))


def propensity_lists(frame: pl.DataFrame, bound: dict) -> Measured:
    """The shuffled lists the propensity estimate reranks: distinct (query, shuffle) pairs."""
    lists = frame.select("query_id", "shuffle").unique().height
    return Measured([float(lists)], f"{frame['query_id'].n_unique()} queries")


def listwise_size(frame: pl.DataFrame, bound: dict) -> Measured:
    """A listwise training set's instances, or its distinct queries (``what: instances | queries``)."""
    value = frame.height if bound["what"] == "instances" else frame["query_id"].n_unique()
    return Measured([float(value)])


_CELL = ("dataset", "retriever")
_RERANK = (*_CELL, "model", "order", "measure")
STATISTICS: dict[str, Statistic] = {
    "first_stage": Statistic("retrieval", (*_CELL, "measure"), (), first_stage, of_kind("retrieval")),
    "rerank": Statistic("rerank", _RERANK, ("debias",), rerank, of_kind("rerank")),
    "rerank_gain": Statistic("rerank", (*_RERANK, "versus"), ("debias",), rerank_gain, of_kind("rerank")),
    "rerank_wins": Statistic("rerank", (*_RERANK, "versus", "units"), ("debias", "significant"), rerank_wins,
                             wins_files, power=0),
    "rerank_variance": Statistic("rerank", (*_CELL, "model", "measure"), ("debias",), rerank_variance,
                                 of_kind("rerank"), power=2),
    "permsc_peak": Statistic("rerank", (*_CELL, "model", "measure"), (), permsc_peak, aggregate_files, power=0),
    "stability": Statistic("stability", (*_CELL, "model", "column"), ("k", "debias"), stability, of_kind("stability")),
    "stability_gain": Statistic("stability", (*_CELL, "model", "column", "versus"), ("k", "debias", "bases"),
                                stability_gain, of_kind("stability")),
    "stability_spread": Statistic("stability", (*_CELL, "model", "column", "versus"), ("k", "debias"),
                                  stability_spread, of_kind("stability")),
    "decisions": Statistic("decisions", (*_CELL, "model", "column"), (), decisions, of_kind("decisions", None)),
    "pool": Statistic("pool", (*_CELL, "model", "column"), ("versus",), pool, of_kind("pool", None)),
    "propensity_lists": Statistic("propensity", ("model",), (), propensity_lists, of_kind("propensity", None), power=0),
    "listwise_size": Statistic("listwise", ("dataset", "what"), (), listwise_size, of_kind("listwise", None), power=0),
}
