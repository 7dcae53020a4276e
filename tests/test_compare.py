"""posbias.compare: two results folders are equal apart from the declared timing fields."""

import json

import polars as pl

from posbias.compare import compare, main


def _results(root, seconds: float, ndcg: float):
    (root / "metrics").mkdir(parents=True)
    frame = pl.DataFrame({"query_id": ["q1"], "ndcg10": [ndcg], "seconds": [seconds]})
    frame.write_parquet(root / "metrics" / "m.parquet")
    (root / "stats.json").write_text(json.dumps({"queries": 1, "wall_seconds": seconds}))
    (root / "t.csv").write_text(f"model,ndcg10,seconds_per_query\nm,{ndcg},{seconds}\n")
    (root / "t.md").write_text(f"| model | nDCG@10 | s/query |\n|---|---|---|\n| m | {ndcg:.4f} | {seconds:.3f} |\n\n"
                               f"_Produced by posbias 0.2.0, commit {seconds}._\n")


def test_runs_that_differ_only_in_timing_are_equal(tmp_path):
    _results(tmp_path / "a", 0.5, 0.8)
    _results(tmp_path / "b", 0.9, 0.8)
    assert compare(tmp_path / "a", tmp_path / "b") == []
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0


def test_a_changed_value_or_a_missing_file_is_reported(tmp_path, capsys):
    _results(tmp_path / "a", 0.5, 0.8)
    _results(tmp_path / "b", 0.5, 0.8000000000000002)  # one ulp: the kind of drift the check exists for
    (tmp_path / "b" / "stats.json").unlink()
    problems = compare(tmp_path / "a", tmp_path / "b")
    assert problems == ["differs: metrics/m.parquet", "missing: stats.json", "differs: t.csv"]
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1 and "3 differ or are missing" in capsys.readouterr().out
