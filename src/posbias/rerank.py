"""Reranking candidate lists with any :class:`~posbias.rerankers.Reranker`, listwise or pointwise.

Listwise models rank sliding windows: windows of different queries are batched round by round;
round t holds every query's t-th window (back to front, :func:`posbias.windows.sliding_windows`),
and each window's result is written back into its query's list before that query's next window is
formed. Pointwise scorers (``reranker.pointwise``, e.g. the Grades scorer) score contiguous windows
of ``window`` documents in the given order, and the whole list is sorted by score.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
from tqdm import tqdm

from posbias import config, debias, orders, schemas
from posbias.data.collection import passage_texts, relevance_threshold
from posbias.errors import PosbiasError
from posbias.rerankers import Reranker, Window
from posbias.runs import strictly_decreasing
from posbias.windows import round_robin, sliding_windows

# The files a rerank job writes per order (``{order}{suffix}`` in its batch folder, posbias.paths.in_batch),
# by kind; the rules downstream read them there.
ORDER_FILES = {"run": ".parquet", "trec": ".trec", "windows": ".windows.parquet", "cost": ".cost.parquet",
               "stats": ".stats.json"}

_RR = config.defaults("reranking")  # window and step: the schema's reranking defaults
_BATCH = config.model_defaults("causal_lm")["batch_size"]


@dataclass
class Candidates:
    """A query and its candidates in presentation order.

    ``key`` names the list in the outputs when one query is presented several times in one call
    (propensity samples); it defaults to the query id, which is what the reranker sees.
    """

    query_id: str
    query: str
    doc_ids: list[str]
    texts: dict[str, str]
    key: str | None = None

    @property
    def name(self) -> str:
        return self.key if self.key is not None else self.query_id


@dataclass
class Presentation:
    """The lists of one evaluation condition, and what was skipped or recorded on the way."""

    lists: list[Candidates]
    no_candidates: int  # queries without first-stage candidates (skipped, counted)
    not_applicable: int  # queries a position order does not apply to (no relevant passage in the top k)
    seeds: dict[str, int]  # per-query shuffle seeds of a shuffled order


def present_candidates(first_stage: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame,
                       grades: dict[str, dict[str, int]], order: orders.Order, root_seed: int, depth: int,
                       relevant_grade: int | None, position_k: int | None, max_queries: int | None = None) -> Presentation:
    """Each query's first-stage top ``depth`` with passage texts, presented in ``order``
    (``relevant_grade`` and ``position_k`` are read by position orders only; None for the others).

    Queries are taken in id order (the first ``max_queries`` if set).
    """
    query_text = dict(queries.select("query_id", "text").iter_rows())
    top = first_stage.filter(pl.col("rank") <= depth).sort("query_id", "rank")
    texts = passage_texts(corpus, top["doc_id"])
    candidates = dict(top.group_by("query_id", maintain_order=True).agg(pl.col("doc_id")).iter_rows())
    qids = sorted(query_text)[:max_queries] if max_queries else sorted(query_text)
    out = Presentation([], 0, 0, {})
    for qid in qids:
        docs = candidates.get(qid, [])
        if not docs:
            out.no_candidates += 1
            continue
        relevant = ({d for d, g in grades.get(qid, {}).items() if g >= relevant_grade} if order.kind == "position"
                    else set())
        presented = orders.present(docs, order, root_seed, qid, relevant, position_k)
        if presented is None:
            out.not_applicable += 1
            continue
        if order.kind == "shuffled":
            out.seeds[qid] = orders.shuffle_seed(root_seed, order.index, qid)
        out.lists.append(Candidates(qid, query_text[qid], presented, texts))
    return out


def chunks(n: int, window: int) -> list[tuple[int, int]]:
    """Contiguous windows [start, end) of ``window`` items covering 0 … n−1 in order."""
    return [(start, min(start + window, n)) for start in range(0, n, window)]


# How a pointwise scorer's list is cut into windows (its ``windowing`` capability): each maps (n, window)
# to (the presented positions in window order, the ranges of the windows over that order).
WINDOWINGS = {"contiguous": lambda n, window: (list(range(n)), chunks(n, window)), "round_robin": round_robin}


def rerank(reranker: Reranker, lists: list[Candidates], window: int = _RR["window"], step: int = _RR["step"],
           batch_size: int = _BATCH) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Rerank every list; returns (run, window log, per-query cost).

    Listwise: the run has rank-derived scores (n − rank + 1), since window scores are not
    comparable across windows. Pointwise: the run carries the model's scores (ties keep the
    presentation order), and ``step`` is ignored. The window log has one row per passage per
    window: query_id, window, start, end, input_position (0-based within the window), doc_id,
    score (null for models without scores), output_rank (0-based within the window). The cost
    table has, per query, the windows reranked,
    the model calls and prompt tokens spent on them (from each window's stats), and wall seconds:
    each batch's measured time shared among its windows in proportion to their prompt tokens
    (equally when the model reads no tokens).
    """
    current = {c.name: list(c.doc_ids) for c in lists}
    if len(current) != len(lists):
        raise ValueError("two candidate lists share a name; give repeated queries distinct keys")
    pointwise = reranker.pointwise
    if pointwise:  # windows over the list in the scorer's windowing (round-robin: a rearranged list)
        layouts = {c.name: WINDOWINGS[reranker.windowing](len(c.doc_ids), window) for c in lists}
        current = {c.name: [c.doc_ids[i] for i in layouts[c.name][0]] for c in lists}
        plans = {name: layout[1] for name, layout in layouts.items()}
    else:
        plans = {c.name: sliding_windows(len(c.doc_ids), window, step) for c in lists}
    scored: dict[str, dict[str, float]] = {qid: {} for qid in current}
    by_id = {c.name: c for c in lists}
    log: dict[str, list] = {k: [] for k in ("query_id", "window", "start", "end", "input_position", "doc_id",
                                            "score", "output_rank")}
    cost = new_cost(current)
    rounds = max((len(p) for p in plans.values()), default=0)
    total = sum(len(p) for p in plans.values())
    with tqdm(total=total, desc="windows", unit="win", mininterval=5) as bar:
        for t in range(rounds):
            todo = [(qid, plan[t]) for qid, plan in plans.items() if t < len(plan)]
            size = len(todo) if reranker.batches_itself else batch_size  # an engine that schedules takes all
            for b in range(0, len(todo), size):
                chunk = todo[b:b + size]
                windows = []
                for qid, (start, end) in chunk:
                    docs = current[qid][start:end]
                    c = by_id[qid]
                    windows.append(Window(c.query_id, c.query, docs, [c.texts[d] for d in docs]))
                started = time.perf_counter()
                results = reranker.rank(windows)
                charge(cost, [qid for qid, _ in chunk], results, time.perf_counter() - started)
                for (qid, (start, end)), win, res in zip(chunk, windows, results):
                    if pointwise:
                        scored[qid].update(zip(win.doc_ids, res.scores))
                    else:
                        current[qid][start:end] = [win.doc_ids[i] for i in res.order]
                    out_rank = {i: r for r, i in enumerate(res.order)}
                    for pos, doc in enumerate(win.doc_ids):
                        log["query_id"].append(qid)
                        log["window"].append(t)
                        log["start"].append(start)
                        log["end"].append(end)
                        log["input_position"].append(pos)
                        log["doc_id"].append(doc)
                        log["score"].append(None if res.scores is None else float(res.scores[pos]))
                        log["output_rank"].append(out_rank[pos])
                bar.update(len(chunk))
    if pointwise:
        current = {c.name: list(c.doc_ids) for c in lists}
        for qid, docs in current.items():
            docs.sort(key=lambda d: -scored[qid][d])  # stable: ties keep the presentation order
        run_rows = [(qid, doc, r + 1, float(scored[qid][doc])) for qid, docs in current.items()
                    for r, doc in enumerate(docs)]
    else:
        run_rows = [(qid, doc, r + 1, float(len(docs) - r)) for qid, docs in current.items()
                    for r, doc in enumerate(docs)]
    run = pl.DataFrame(run_rows, schema={"query_id": pl.String, "doc_id": pl.String, "rank": pl.Int32,
                                         "score": pl.Float64}, orient="row")
    run = run.with_columns(score=pl.Series(strictly_decreasing(run["score"].to_numpy(), run["query_id"].to_numpy())))
    window_log = pl.DataFrame(log, schema={"query_id": pl.String, "window": pl.Int32, "start": pl.Int32,
                                           "end": pl.Int32, "input_position": pl.Int32, "doc_id": pl.String,
                                           "score": pl.Float64, "output_rank": pl.Int32})
    return run, window_log, cost_table(cost)


def new_cost(query_ids) -> dict[str, dict]:
    """Empty per-query cost counters (windows, calls, prompt tokens, seconds) for :func:`charge`."""
    return {qid: {"windows": 0, "calls": 0, "prompt_tokens": 0, "seconds": 0.0} for qid in query_ids}


def charge(cost: dict[str, dict], query_ids: list[str], results: list, elapsed: float) -> None:
    """Add one batch's windows (``results[i]`` a window of ``query_ids[i]``) to ``cost``: each window's calls
    and prompt tokens from its stats, and the batch's measured seconds shared among its windows in
    proportion to their prompt tokens (equally when the model reads no tokens)."""
    tokens = [r.stats.get("prompt_tokens", 0) for r in results]
    shares = [t / sum(tokens) for t in tokens] if sum(tokens) else [1 / len(results)] * len(results)
    for qid, res, share in zip(query_ids, results, shares):
        c = cost[qid]
        c["windows"] += 1
        c["calls"] += res.stats.get("calls", 1)
        c["prompt_tokens"] += res.stats.get("prompt_tokens", 0)
        c["seconds"] += elapsed * share


def cost_table(cost: dict[str, dict]) -> pl.DataFrame:
    """The per-query cost table (:data:`posbias.schemas.COST`) of :func:`charge`'s counters."""
    return pl.from_arrow(pa.Table.from_pylist([{"query_id": q, **c} for q, c in cost.items()], schema=schemas.COST))


@dataclass
class Experiment:
    """What reranking one (dataset, retriever) reads: first-stage run, queries, corpus and qrels grades."""

    name: str  # the dataset, for messages
    first_stage: pl.DataFrame
    queries: pl.DataFrame
    corpus: pl.DataFrame
    grades: dict[str, dict[str, int]]


def window_of(base: Reranker, settings: dict) -> int:
    """The window one ``rerank`` job cuts lists into: a pointwise scorer's B (its dataset's consumer's
    when that is not passage reranking, else the model's ``grade_window``), else the listwise window."""
    return settings.get("grade_window") or base.window or settings["window"]


def rerank_order(base: Reranker, order_name: str, method: str, settings: dict, seed: int, data: Experiment,
                 batch_size: int) -> tuple[Presentation, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One evaluation order of one experiment: present the candidates, wrap ``base`` in debias ``method`` and
    rerank; returns (presentation, run, window log, cost). ``settings`` is the job's
    :func:`posbias.config.rerank_settings`. The ``rerank`` job and the compute plan (:mod:`posbias.plan`)
    both call this, so the plan counts exactly the windows the job reranks.
    """
    order = orders.parse(order_name)
    best = max((g for q in data.grades.values() for g in q.values()), default=None)
    relevant_grade = settings.get("relevant_grade")
    relevant_grade = None if relevant_grade is None else relevance_threshold(relevant_grade, best)
    shown = present_candidates(data.first_stage, data.queries, data.corpus, data.grades, order, seed,
                               settings["depth"], relevant_grade, settings.get("position_k"), settings["queries"])
    if order.kind == "position" and shown.not_applicable and not shown.lists:
        raise PosbiasError(f"reranking.relevant_grade {settings['relevant_grade']}: no query of {data.name} has a passage graded "
                           f"that high in its top {settings['position_k']} (the qrels' highest grade is {best}), so "
                           f"{order} has nothing to move; lower reranking.relevant_grade")
    base.reset_stats()  # the counters in each order's stats are that order's
    reranker = debias.wrap(base, method, seed, settings["debias"])
    run, window_log, cost = rerank(reranker, shown.lists, window_of(base, settings), settings["step"], batch_size)
    return shown, run, window_log, cost


def save_order(paths: dict[str, Path], name: str, debias: str, tag: str, result: tuple, wall: float,
               model_stats: dict, settings: dict, log: logging.Logger) -> dict:
    """Write one reranked order's files (``paths`` by :data:`ORDER_FILES` key): the run as Parquet and TREC
    (``tag`` its run tag, for trec_eval, ranx and rank_llm), the window log, the per-query cost, and last the
    stats JSON (totals, skipped queries, the model's counters, the shuffle seeds), which marks the order
    finished; log what the job's log should say of it. ``result`` is :func:`rerank_order`'s, ``wall`` its
    seconds. Returns the stats."""
    from posbias import atomic, runs

    shown, run, window_log, cost = result
    if shown.no_candidates:
        log.warning("%d queries have no first-stage candidates; skipped", shown.no_candidates)
    if shown.not_applicable:
        log.info("%d queries have no relevant passage in the top %d; skipped for %s", shown.not_applicable,
                 settings["position_k"], name)
    schemas.write(run, paths["run"], "run")
    runs.write_trec(run, paths["trec"], tag)
    schemas.write(window_log, paths["windows"], "window_log")
    schemas.write(cost, paths["cost"], "cost")
    stats = {
        "order": name, "debias": debias, "queries": len(shown.lists),
        "skipped_no_candidates": shown.no_candidates, "skipped_not_applicable": shown.not_applicable,
        "windows": window_log.select("query_id", "window").n_unique() if window_log.height else 0,
        "wall_seconds": wall, **model_stats, "shuffle_seeds": shown.seeds,
    }
    atomic.write_text(paths["stats"], json.dumps(stats, indent=1, sort_keys=True))
    if stats.get("truncated_passages"):
        log.info("%s: %d passages were cut to fit the word budget or the context", name,
                 stats["truncated_passages"])
    if stats.get("parse_failures") or stats.get("missing_ids"):
        log.warning("%s: %d windows without a parsable ranking, %d identifiers missing (appended in input order)",
                    name, stats["parse_failures"], stats["missing_ids"])
    log.info("%s: reranked %d queries in %.1f s (%d windows)", name, len(shown.lists), wall, stats["windows"])
    return stats
