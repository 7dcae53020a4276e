import polars as pl
import pytest

from posbias import runs
from posbias.errors import PosbiasError


def test_canonical_breaks_ties_by_doc_id_and_makes_scores_strict():
    run = pl.DataFrame({"query_id": ["q"] * 4 + ["r"], "doc_id": ["c", "a", "b", "d", "x"],
                        "score": [1.0, 2.0, 2.0, 2.0, 5.0]})
    out = runs.canonical(run)
    q = out.filter(pl.col("query_id") == "q")
    assert q["doc_id"].to_list() == ["a", "b", "d", "c"]
    assert q["rank"].to_list() == [1, 2, 3, 4]
    scores = q["score"].to_list()
    assert all(a > b for a, b in zip(scores, scores[1:]))
    assert scores[0] == 2.0 and scores[1] == pytest.approx(2.0) and scores[3] == 1.0


def test_canonical_depth_and_duplicates():
    run = pl.DataFrame({"query_id": ["q"] * 4, "doc_id": ["a", "a", "b", "c"], "score": [1.0, 3.0, 2.0, 0.5]})
    out = runs.canonical(run, depth=2)
    assert out["doc_id"].to_list() == ["a", "b"]
    assert out["score"].to_list() == [3.0, 2.0]


def test_trec_roundtrip(tmp_path):
    run = runs.canonical(pl.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "b", "c"], "score": [1.0, 1.0, 0.3]}))
    runs.write_trec(run, tmp_path / "r.trec", "tag")
    assert (tmp_path / "r.trec").read_text().splitlines()[0] == "1 Q0 a 1 1.0 tag"
    assert runs.read_trec(tmp_path / "r.trec").to_dicts() == run.to_dicts()


@pytest.mark.parametrize(
    "line, message",
    [("1 Q0 a 1 2.0", r"r.trec:2: a TREC run line needs 6 columns"),
     ("1 Q0 a first 2.0 tag", r"r.trec:2: rank \(column 4\) must be an integer")],
)
def test_trec_wrong_columns(tmp_path, line, message):
    (tmp_path / "r.trec").write_text(f"1 Q0 b 1 3.0 tag\n{line}\n")
    with pytest.raises(PosbiasError, match=message):
        runs.read_trec(tmp_path / "r.trec")
