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

from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from posbias import metrics, schemas
from posbias.permute import derive_seed, fisher_yates
from posbias.rerank import Candidates
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


def score(reranker: Reranker, lists: list[Candidates], cells: list[Cell], batch_size: int) -> pl.DataFrame:
    """Each kept-or-companion document's score in each cell: query_id, pool, order, slot, doc_id, score."""
    by_query = {c.query_id: c for c in lists}
    rows = []
    for b in range(0, len(cells), batch_size):
        batch = cells[b:b + batch_size]
        windows = [Window(x.query_id, by_query[x.query_id].query, list(x.doc_ids),
                          [by_query[x.query_id].texts[d] for d in x.doc_ids]) for x in batch]
        for cell, result in zip(batch, reranker.rank(windows)):
            rows += [(cell.query_id, cell.pool, cell.order, slot, d, float(s))
                     for slot, (d, s) in enumerate(zip(cell.doc_ids, result.scores))]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "pool": pl.Int32, "order": pl.Int32, "slot": pl.Int32,
                                      "doc_id": pl.String, "score": pl.Float64}, orient="row")


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
