"""Propensity estimation (DebiasFirst): how often a reranker moves input position i to output rank r.

1. :func:`samples`: N_q training queries (seeded sample of those with at least k first-stage hits),
   their top k, each in n seeded Fisher–Yates shuffles; one row per (query, shuffle, position).
2. The samples are reranked with the configured model (one window each; see
   :func:`sample_lists` and :func:`transitions`).
3. :func:`estimate`: ω[i, r] = #(passage at input position i placed at output rank r) / (|Q|·k·n),
   optionally with additive smoothing; k·ω[i, ·] is P(output rank | input position i).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from posbias.permute import derive_seed, fisher_yates
from posbias.rerank import Candidates


def samples(first_stage: pl.DataFrame, n_queries: int, k: int, n_shuffles: int, seed: int) -> pl.DataFrame:
    """Rows (query_id, shuffle, input_position, doc_id) for n shuffles of the top k of N_q sampled queries."""
    top = first_stage.filter(pl.col("rank") <= k).sort("query_id", "rank")
    lists = top.group_by("query_id", maintain_order=True).agg(pl.col("doc_id"))
    eligible = lists.filter(pl.col("doc_id").list.len() == k).sort("query_id")
    if eligible.height == 0:
        raise ValueError(f"no query has {k} first-stage hits; lower propensity.k")
    rng = np.random.default_rng(derive_seed(seed, "propensity-queries"))
    chosen = sorted(rng.choice(eligible.height, size=min(n_queries, eligible.height), replace=False))
    rows: dict[str, list] = {"query_id": [], "shuffle": [], "input_position": [], "doc_id": []}
    for qid, docs in eligible[chosen].iter_rows():
        for s in range(n_shuffles):
            for p, d in enumerate(fisher_yates(docs, derive_seed(seed, "propensity", qid, s))):
                rows["query_id"].append(qid)
                rows["shuffle"].append(s)
                rows["input_position"].append(p)
                rows["doc_id"].append(d)
    return pl.DataFrame(rows, schema={"query_id": pl.String, "shuffle": pl.Int32, "input_position": pl.Int32,
                                      "doc_id": pl.String})


def sample_lists(sampled: pl.DataFrame, query_text: dict[str, str], texts: dict[str, str]) -> list[Candidates]:
    """One candidate list per (query, shuffle), keyed ``<qid>#<shuffle>`` for the rerank driver."""
    grouped = sampled.sort("query_id", "shuffle", "input_position").group_by(
        "query_id", "shuffle", maintain_order=True).agg(pl.col("doc_id"))
    return [Candidates(q, query_text[q], docs, texts, key=f"{q}#{s}") for q, s, docs in grouped.iter_rows()]


def transitions(sampled: pl.DataFrame, reranked: pl.DataFrame) -> pl.DataFrame:
    """Join samples with the reranked runs (keyed ``<qid>#<shuffle>``): adds the 0-based output_rank."""
    ranks = reranked.select(
        pl.col("query_id").str.split("#").list.get(0).alias("query_id"),
        pl.col("query_id").str.split("#").list.get(1).cast(pl.Int32).alias("shuffle"),
        "doc_id", (pl.col("rank") - 1).cast(pl.Int32).alias("output_rank"),
    )
    joined = sampled.join(ranks, on=["query_id", "shuffle", "doc_id"], how="left")
    if joined["output_rank"].null_count():
        raise ValueError("some sampled passages are missing from the reranked runs")
    return joined


def estimate(transitions_: pl.DataFrame, k: int, smoothing: float = 0.0) -> np.ndarray:
    """The k × k ω (rows: input position, columns: output rank), summing to 1."""
    counts = np.zeros((k, k), dtype=np.float64)
    np.add.at(counts, (transitions_["input_position"].to_numpy(), transitions_["output_rank"].to_numpy()), 1.0)
    return (counts + smoothing) / (counts.sum() + smoothing * k * k)


def to_frame(omega: np.ndarray) -> pl.DataFrame:
    k = omega.shape[0]
    return pl.DataFrame({"input_position": np.repeat(np.arange(k), k).astype(np.int32),
                         "output_rank": np.tile(np.arange(k), k).astype(np.int32),
                         "omega": omega.reshape(-1)})


def from_frame(frame: pl.DataFrame) -> np.ndarray:
    k = int(frame["input_position"].max()) + 1
    omega = np.zeros((k, k))
    omega[frame["input_position"].to_numpy(), frame["output_rank"].to_numpy()] = frame["omega"].to_numpy()
    return omega
