import polars as pl
import pytest

from posbias import schemas
from posbias.errors import PosbiasError


def test_roundtrip_casts_and_is_byte_identical(tmp_path):
    frame = pl.DataFrame({"query_id": ["1", "2"], "doc_id": ["a", "b"], "relevance": [1, 0]})
    schemas.write(frame, tmp_path / "a.parquet", "qrels")
    schemas.write(frame, tmp_path / "b.parquet", "qrels")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    back = schemas.read(tmp_path / "a.parquet", "qrels")
    assert back.schema["relevance"] == pl.Int32
    assert back.to_dicts() == frame.to_dicts()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]  # no temporaries left


def test_wrong_columns_rejected_and_nothing_written(tmp_path):
    frame = pl.DataFrame({"query_id": ["1"], "docid": ["a"], "relevance": [1]})
    with pytest.raises(PosbiasError, match=r"missing \['doc_id'\], unexpected \['docid'\]"):
        schemas.write(frame, tmp_path / "q.parquet", "qrels")
    assert list(tmp_path.iterdir()) == []


def test_uncastable_type_rejected(tmp_path):
    frame = pl.DataFrame({"query_id": ["1"], "doc_id": ["a"], "relevance": ["high"]})
    with pytest.raises(PosbiasError, match="cannot cast"):
        schemas.write(frame, tmp_path / "q.parquet", "qrels")


def test_read_missing_file_names_it(tmp_path):
    with pytest.raises(PosbiasError, match="no such file"):
        schemas.read(tmp_path / "nope.parquet", "run")
