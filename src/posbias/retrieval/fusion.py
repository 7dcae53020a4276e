"""Reciprocal-rank fusion of first-stage runs, through pyserini's fusion module."""

from __future__ import annotations

import polars as pl

from posbias.retrieval.kinds import RetrievalJob
from posbias.runs import canonical


def rrf(runs: list[pl.DataFrame], k: int, depth: int) -> pl.DataFrame:
    """RRF (Cormack et al., 2009): score(d) = sum over runs of 1 / (k + rank(d)); canonical output.

    Each input run contributes its top ``depth``; the fused run is cut to ``depth``.
    """
    from pyserini.fusion import reciprocal_rank_fusion
    from pyserini.trectools import TrecRun

    trec_runs = []
    for run in runs:
        frame = run.select(
            topic="query_id", q0=pl.lit("Q0"), docid="doc_id", rank="rank", score="score", tag=pl.lit("run")
        ).to_pandas()
        trec_runs.append(TrecRun.from_dataframes([frame]))
    fused = reciprocal_rank_fusion(trec_runs, rrf_k=k, depth=depth, k=depth).run_data
    return canonical(
        pl.DataFrame({"query_id": fused["topic"].astype(str), "doc_id": fused["docid"].astype(str),
                      "score": fused["score"].astype(float)}),
        depth,
    )


def search_job(job: RetrievalJob):
    """Kind ``rrf`` (:mod:`posbias.retrieval.kinds`): the entry's runs fused; every query of a fused run has hits."""
    return rrf(job.runs, k=job.spec["k"], depth=job.spec["depth"]), []
