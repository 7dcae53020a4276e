"""The pool-replacement design of OC-SFT's analyses: Pool-PSI and the variance decomposition.

For each query, the first ``kept`` first-stage candidates are kept; each of ``pools`` presentations
fills the rest of a window of B with companions drawn (seeded) from the query's other candidates,
and each filled window is scored in ``orders`` arrangements: arrangement 0 puts the kept documents
first, in first-stage order, then the companions; the others are seeded permutations of the slots,
the same for every pool (so a kept document's slot depends on the arrangement, not on its companions). From one scorer's scores of that design, per query:

- Pool-PSI (:func:`posbias.metrics.pool_psi`): τ-PSI of the kept documents' rankings over the pools
  in arrangement 0, where only the companions change (their slots stay fixed);
- the variance decomposition (:func:`posbias.metrics.variance_decomposition`) of the kept
  documents' scores over every (pool, arrangement): document, companion coupling, order residual.

A query with fewer than B − kept other candidates cannot be varied and is left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
from tqdm import tqdm

from posbias import metrics, orders, schemas
from posbias.permute import derive_seed, fisher_yates
from posbias.rerank import Candidates, charge, cost_table, new_cost, present_candidates
from posbias.rerankers import Reranker, Window


@dataclass(frozen=True)
class Cell:
    """One scored window of the design: its query, pool, arrangement and documents in slot order."""

    query_id: str
    pool: int
    order: int
    doc_ids: tuple[str, ...]


def design(lists: list[Candidates], window: int, kept: int, pools: int, orders: int, seed: int) -> tuple[list[Cell], list[str]]:
    """The design's windows over ``lists`` (first-stage order), and the query ids left out."""
    cells, skipped = [], []
    for c in lists:
        head, rest = c.doc_ids[:kept], c.doc_ids[kept:]
        if len(head) < kept or len(rest) < window - kept or window - kept < 1:
            skipped.append(c.query_id)
            continue
        arrangements = [list(range(window))] + [fisher_yates(range(window), derive_seed(seed, "pool-order", c.query_id, o))
                                                for o in range(1, orders)]
        for p in range(pools):
            companions = fisher_yates(rest, derive_seed(seed, "pool", c.query_id, p))[: window - kept]
            base = tuple(head) + tuple(companions)
            for o in range(orders):
                # the same slot permutation for every pool: a kept document sits in the same slot of
                # arrangement o whatever its companions, so slot effects land in the order residual alone
                shown = base if o == 0 else tuple(base[i] for i in arrangements[o])
                cells.append(Cell(c.query_id, p, o, shown))
    return cells, skipped


def layout(first_stage: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, grades: dict[str, dict[str, int]],
           settings: dict, window: int, seed: int) -> tuple[list[Candidates], list[Cell], list[str]]:
    """One pool job's candidate lists (each query's first-stage top ``settings["depth"]``, the first
    ``settings["queries"]`` queries), the design's cells over them and the queries left out. The
    ``pool_design`` job and the compute plan (:mod:`posbias.plan`) both call this."""
    shown = present_candidates(first_stage, queries, corpus, grades, orders.parse(orders.ORIGINAL), seed, settings["depth"],
                               None, None, settings.get("queries"))
    cells, skipped = design(shown.lists, window, settings["kept"], settings["pools"], settings["orders"], seed)
    return shown.lists, cells, skipped


def score(reranker: Reranker, lists: list[Candidates], cells: list[Cell], batch_size: int,
          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(each kept-or-companion document's score in each cell: query_id, pool, order, slot, doc_id, score;
    the per-query cost, as :func:`posbias.rerank.rerank` writes it). The job and the compute plan
    (:mod:`posbias.plan`) both call this."""
    by_query = {c.query_id: c for c in lists}
    cost = new_cost(dict.fromkeys(x.query_id for x in cells))
    rows = []
    for b in tqdm(range(0, len(cells), batch_size), desc="pool windows", unit="batch", mininterval=5):
        batch = cells[b:b + batch_size]
        windows = [Window(x.query_id, by_query[x.query_id].query, list(x.doc_ids),
                          [by_query[x.query_id].texts[d] for d in x.doc_ids]) for x in batch]
        started = time.perf_counter()
        results = reranker.rank(windows)
        charge(cost, [x.query_id for x in batch], results, time.perf_counter() - started)
        for cell, result in zip(batch, results):
            rows += [(cell.query_id, cell.pool, cell.order, slot, d, float(s))
                     for slot, (d, s) in enumerate(zip(cell.doc_ids, result.scores))]
    scores = pl.DataFrame(rows, schema={"query_id": pl.String, "pool": pl.Int32, "order": pl.Int32, "slot": pl.Int32,
                                        "doc_id": pl.String, "score": pl.Float64}, orient="row")
    return scores, cost_table(cost)


def summarise(scores: pl.DataFrame, kept: int, keys: dict[str, str]) -> pl.DataFrame:
    """Per query (schema POOL): Pool-PSI and the variance decomposition of the kept documents' scores."""
    rows = []
    for (query_id,), group in scores.group_by("query_id", maintain_order=True):
        first = group.filter((pl.col("pool") == 0) & (pl.col("order") == 0)).sort("slot")
        kept_ids = first["doc_id"].to_list()[:kept]
        mine = group.filter(pl.col("doc_id").is_in(kept_ids))
        by_pool = [dict(g.filter(pl.col("order") == 0).select("doc_id", "score").iter_rows())
                   for _, g in mine.group_by("pool", maintain_order=True)]
        parts = metrics.variance_decomposition(mine.select("doc_id", "pool", "order", "score"))
        rows.append({**keys, "query_id": query_id, "pools": len(by_pool),
                     "pool_psi": metrics.pool_psi(by_pool, kept_ids), **parts})
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=schemas.POOL))
