"""Ranked runs: the canonical tie-free form, and TREC run files.

A canonical run is sorted by query, then by rank; within a query the scores strictly decrease.
Ties in the input are broken by doc id (ascending) and the tied scores are nudged down by the
smallest representable step (``numpy.nextafter``), so that every tool that re-sorts by score
(trec_eval, ir_measures, pyserini fusion) sees exactly the order our ranks say.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import polars as pl

from posbias import textfiles
from posbias.atomic import replacing
from posbias.errors import PosbiasError


def canonical(run: pl.DataFrame, depth: int | None = None) -> pl.DataFrame:
    """Sort by (score desc, doc_id asc) per query, cut to ``depth``, rank from 1, make scores strict.

    ``run`` needs the columns query_id, doc_id, score (any others are dropped). Duplicate
    (query, doc) pairs keep their best score.
    """
    frame = (
        run.select(
            pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("score").cast(pl.Float64)
        )
        .group_by("query_id", "doc_id", maintain_order=True)
        .agg(pl.col("score").max())
        .sort(["query_id", "score", "doc_id"], descending=[False, True, False])
    )
    frame = frame.with_columns(rank=pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int32))
    if depth is not None:
        frame = frame.filter(pl.col("rank") <= depth)
    scores = strictly_decreasing(frame["score"].to_numpy(), frame["query_id"].to_numpy())
    return frame.with_columns(score=pl.Series(scores)).select("query_id", "doc_id", "rank", "score")


def strictly_decreasing(scores: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Scores already in rank order, with each tie nudged just below its predecessor (per query)."""
    scores = np.array(scores, dtype=np.float64)
    for i in range(1, len(scores)):
        if queries[i] == queries[i - 1] and scores[i] >= scores[i - 1]:
            scores[i] = np.nextafter(scores[i - 1], -np.inf)
    return scores


def write_trec(run: pl.DataFrame, path: str | os.PathLike, tag: str) -> None:
    """Write a canonical run as a six-column TREC run file (atomically)."""
    with replacing(path) as tmp, open(tmp, "w") as out:
        for qid, did, rank, score in run.select("query_id", "doc_id", "rank", "score").iter_rows():
            out.write(f"{qid} Q0 {did} {rank} {score!r} {tag}\n")


def read_trec(path: str | os.PathLike) -> pl.DataFrame:
    """Read a TREC run file (``qid Q0 docid rank score tag``) into a canonical run.

    Raises :class:`PosbiasError` naming the file and line on anything but six whitespace-separated
    columns with a numeric rank and score.
    """
    path = Path(path)
    if not path.is_file():
        raise PosbiasError(f"{path}: TREC run file not found; check the `path` of this run in the config")
    qids, dids, scores = [], [], []
    for lineno, line in textfiles.lines(path):
        cols = line.split()
        if len(cols) != 6:
            raise PosbiasError(
                f"{path}:{lineno}: a TREC run line needs 6 columns `qid Q0 docid rank score tag`, "
                f"found {len(cols)}: {line.strip()[:80]!r}"
            )
        try:
            int(cols[3])
            score = float(cols[4])
        except ValueError:
            raise PosbiasError(
                f"{path}:{lineno}: rank (column 4) must be an integer and score (column 5) a number, "
                f"found {cols[3]!r} and {cols[4]!r}"
            ) from None
        if not math.isfinite(score):
            raise PosbiasError(f"{path}:{lineno}: score {cols[4]!r} is not a finite number; fix or drop the line")
        qids.append(cols[0])
        dids.append(cols[2])
        scores.append(score)
    if not qids:
        raise PosbiasError(f"{path}: the TREC run file is empty")
    return canonical(pl.DataFrame({"query_id": qids, "doc_id": dids, "score": scores}))
