"""The candidates a dataset lists with each query, in its order (``kind: listed`` retrievers): the
responses of a response-ranking set, which has no first stage to run. Every judged document of a
query, in corpus order, scored by its place in that order."""

from __future__ import annotations

import polars as pl

from posbias import runs
from posbias.retrieval.kinds import RetrievalJob


def search(corpus: pl.DataFrame, qrels: pl.DataFrame, queries: pl.DataFrame, depth: int) -> tuple[pl.DataFrame, list[str]]:
    """The run (schema RUN) over every query, and the query ids without judged documents (no hits)."""
    place = corpus.select("doc_id").with_row_index("place")
    listed = qrels.select("query_id", "doc_id").join(place, on="doc_id", how="inner")
    run = (listed.filter(pl.col("query_id").is_in(queries["query_id"].to_list()))
           .with_columns(score=-pl.col("place").cast(pl.Float64)).select("query_id", "doc_id", "score"))
    empty = sorted(set(queries["query_id"].to_list()) - set(run["query_id"].to_list()))
    return runs.canonical(run, depth), empty


def search_job(job: RetrievalJob):
    """Kind ``listed`` (:mod:`posbias.retrieval.kinds`)."""
    return search(job.data["corpus"], job.data["qrels"], job.data["queries"], job.spec["depth"])
