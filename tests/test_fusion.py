import polars as pl
import pytest

from posbias.retrieval.fusion import rrf
from posbias.runs import canonical


def _run(qid, docs):
    return canonical(pl.DataFrame({"query_id": [qid] * len(docs), "doc_id": docs,
                                   "score": [float(len(docs) - i) for i in range(len(docs))]}))


def test_rrf_known_answer():
    fused = rrf([_run("1", ["a", "b", "c"]), _run("1", ["c", "b", "d"])], k=60, depth=10)
    assert fused["doc_id"].to_list() == ["c", "b", "a", "d"]
    expected = {"c": 1 / 61 + 1 / 63, "b": 2 / 62, "a": 1 / 61, "d": 1 / 63}
    for did, score in zip(fused["doc_id"], fused["score"]):
        assert score == pytest.approx(expected[did])


def test_rrf_depth_and_queries_in_only_one_run():
    fused = rrf([_run("1", ["a", "b", "c"]), _run("2", ["x"])], k=1, depth=2)
    assert fused.filter(pl.col("query_id") == "1")["doc_id"].to_list() == ["a", "b"]
    assert fused.filter(pl.col("query_id") == "2")["doc_id"].to_list() == ["x"]
