"""Real collections offline, run once per session (``tests/runs.py``): Cranfield through ir_datasets
(BM25, MiniLM dense, RRF) and the TREC DL19 and DL20 BM25 and SPLADE++ ED top-100 lists imported from
rank_llm's candidate files, which reproduce the published first stages in the reproduction matrix."""

from __future__ import annotations

import polars as pl
import pytest

pytestmark = pytest.mark.workflow


def _ndcg(run, dataset, retriever):
    frame = pl.read_parquet(run.path("results", "metrics", "retrieval", dataset, f"{retriever}.parquet"))
    return frame.filter(pl.col("measure") == "nDCG@10")["value"].mean()


def test_cranfield_through_ir_datasets(collections_run):
    scores = {r: _ndcg(collections_run, "cranfield", r) for r in ("bm25", "dense", "rrf")}
    assert 0.25 < scores["bm25"] < 0.6, scores
    assert 0.15 < scores["dense"] < 0.6, scores
    assert scores["rrf"] > min(scores["bm25"], scores["dense"]), scores


def test_dl19_imported_bm25_candidates_reproduce_pyserini(collections_run):
    # pyserini's BM25 (flat, k1=0.9, b=0.4) on DL19 passage scores nDCG@10 = 0.5058.
    assert _ndcg(collections_run, "dl19", "imported:bm25") == pytest.approx(0.5058, abs=5e-4)


def test_dl19_imported_run_is_written_as_trec(collections_run):
    trec = collections_run.text("results", "runs", "dl19", "imported:bm25.trec").splitlines()
    assert len(trec) == 4300
    assert [line.split()[:4] for line in trec if line.startswith("264014 ")][0] == ["264014", "Q0", "5611210", "1"]


def test_the_reproduction_matrix_shows_the_published_first_stages_ok(collections_run):
    """Anserini's BM25 (0.5058, 0.4796) and SPLADE++ ED (0.7308, 0.7197) nDCG@10 on DL19 and DL20, to
    the published precision; every paper condition is not run (no paper model here)."""
    matrix = collections_run.table("reproduction")
    marks = dict(zip(matrix["id"], matrix["mark"]))
    published = ["anserini-bm25-dl19", "anserini-bm25-dl20", "anserini-splade-pp-ed-dl19", "anserini-splade-pp-ed-dl20"]
    assert [marks[i] for i in published] == ["OK"] * 4
    ok = matrix.filter(pl.col("mark") == "OK")
    assert ok["run_mean"].round(4).to_list() == [0.5058, 0.4796, 0.7308, 0.7197]
    assert set(matrix.filter(~pl.col("id").is_in(published))["mark"]) == {"not run"}
    line = f"posbias: reproduction: 4 OK, 0 differ, {matrix.height - 4} not run; results/tables/reproduction.md"
    assert line in collections_run.console
