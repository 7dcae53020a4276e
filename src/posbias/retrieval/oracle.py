"""A simulated first stage of known quality: each judged document scored by its qrels grade plus
seeded Gaussian noise (``kind: oracle`` retrievers).

Real first stages put relevant documents early *most* of the time; that correlation between input
position and relevance is what a listwise reranker trained on first-stage orders learns as a
position prior. This retriever makes the correlation a dial (``noise``: 0 is the ideal order,
large values approach a random order), so controlled experiments (the toy task of the default run)
can produce biased orders without a lexical matcher. Only judged documents are candidates.

The same :func:`noisy_order` orders the toy task's listwise training instances, so a training list
and the first-stage run of its query agree when they share the seed and the noise.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from posbias import runs
from posbias.permute import derive_seed
from posbias.retrieval.kinds import RetrievalJob


def noisy_scores(grades: np.ndarray, noise: float, seed: int, query_id: str) -> np.ndarray:
    """grade + N(0, noise²), drawn from a generator seeded by (seed, query id)."""
    rng = np.random.default_rng(derive_seed(seed, "oracle", query_id))
    return np.asarray(grades, dtype=np.float64) + rng.normal(0.0, noise, len(grades))


def noisy_order(grades: np.ndarray, noise: float, seed: int, query_id: str) -> np.ndarray:
    """Indices of ``grades`` by decreasing noisy score (ties: lower index first)."""
    return np.argsort(-noisy_scores(grades, noise, seed, query_id), kind="stable")


def search(qrels: pl.DataFrame, queries: pl.DataFrame, noise: float, depth: int, seed: int) -> tuple[pl.DataFrame, list[str]]:
    """The run (schema RUN) over every query, and the query ids without judged documents (no hits)."""
    judged = {key[0]: group.sort("doc_id") for key, group in qrels.group_by("query_id", maintain_order=True)}
    rows, empty = [], []
    for query_id in queries["query_id"]:
        group = judged.get(query_id)
        if group is None:
            empty.append(query_id)
            continue
        scores = noisy_scores(group["relevance"].to_numpy(), noise, seed, query_id)
        rows.append(pl.DataFrame({"query_id": query_id, "doc_id": group["doc_id"], "score": scores}))
    run = pl.concat(rows) if rows else pl.DataFrame(schema={"query_id": pl.String, "doc_id": pl.String,
                                                              "score": pl.Float64})
    return runs.canonical(run, depth), empty


def search_job(job: RetrievalJob):
    """Kind ``oracle`` (:mod:`posbias.retrieval.kinds`): the entry's noise and depth, the config seed."""
    return search(job.data["qrels"], job.data["queries"], job.spec["noise"], job.spec["depth"], job.seed)
