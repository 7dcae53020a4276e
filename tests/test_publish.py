"""posbias.publish: a finished run's tables, figures and per-query metrics, copied with their provenance; a run
from an uncommitted checkout or from several commits is refused, and nothing half-written is left."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from posbias import publish
from posbias.errors import PosbiasError

CONFIG_TEXT = "seed: 42\n"


def _record(commit: str = "c0ffee", dirty: bool = False, kernels: str = "avx2") -> dict:
    return {"posbias_version": "9.9.9", "git_commit": commit, "git_dirty": dirty, "git_describe": commit[:7],
            "rule": "paper_table", "wildcards": {}, "params_sha256": "0" * 64, "seed": 42, "packages": {"torch": "x"},
            "cpu_kernels": kernels}


def _run(tmp_path: Path, records: list[dict]) -> tuple[Path, Path]:
    run = tmp_path / "run"
    tables = run / "results" / "tables"
    tables.mkdir(parents=True)
    for i, rec in enumerate(records):
        (tables / f"t{i}.md").write_text(f"# t{i}\n\n| a |\n|---|\n| 1 |\n\n<!-- posbias.provenance "
                                         f"{json.dumps(rec)} -->\n")
        (tables / f"t{i}.csv").write_text("a\n1\n")
    metrics = run / "results" / "metrics" / "rerank" / "m" / "d" / "imported:bm25"
    metrics.mkdir(parents=True)
    row = {"model": "m", "dataset": "d", "retriever": "imported:bm25", "order": "original", "query_id": "q1",
           "measure": "nDCG@10"}
    pl.DataFrame([{**row, "debias": "none", "value": 0.25}]).write_parquet(metrics / "none.parquet")
    pl.DataFrame([{**row, "debias": "permsc@3", "value": 0.5}]).write_parquet(metrics / "permsc@3.parquet")
    pl.DataFrame([{"model": "m", "curve_spread": 1.0}]).write_parquet(metrics / "none.summary.parquet")
    (run / "benchmarks" / "rerank").mkdir(parents=True)
    (run / "benchmarks" / "rerank" / "a.tsv").write_text("s\th:m:s\n12.5\t0:00:12\n")
    (run / "benchmarks" / "b.tsv").write_text("s\th:m:s\n7.5\t0:00:07\n")
    (run / ".snakemake" / "log").mkdir(parents=True)
    (run / ".snakemake" / "log" / "2026-12-06T030000.snakemake.log").write_text(
        "Building DAG of jobs...\n[Sun Dec  6 03:00:00 2026]\nlocalrule all:\n[Sun Dec  6 03:55:00 2026]\nDone\n")
    # a second invocation (a resumed or finished study): the run's wall time sums both
    (run / ".snakemake" / "log" / "2026-12-06T040000.snakemake.log").write_text(
        "Building DAG of jobs...\n[Sun Dec  6 04:00:00 2026]\nlocalrule all:\n[Sun Dec  6 04:00:30 2026]\nDone\n")
    (tables / "claims.csv").write_text("claim\nx\n")  # a CSV without a Markdown twin
    config = tmp_path / "study.yaml"
    config.write_text(CONFIG_TEXT)
    return run, config


def test_a_run_is_published_with_its_per_query_values_times_and_hashes(tmp_path):
    run, config = _run(tmp_path, [_record(), _record()])
    dest = tmp_path / "docs" / "results" / "study"
    manifest = publish.publish(run, dest, config)
    assert manifest["git_commit"] == "c0ffee" and manifest["config"] == "study.yaml" and manifest["cpu_kernels"] == "avx2"
    assert manifest["job_seconds"] == 20.0 and manifest["wall_seconds"] == 55 * 60 + 30 and manifest["invocations"] == 2
    per_query = pl.read_csv(dest / publish.PER_QUERY)
    assert per_query.sort("debias")["value"].to_list() == [0.25, 0.5]  # the summaries beside them are not copied
    assert (dest / "config.yaml").read_text() == CONFIG_TEXT
    assert sorted(manifest["files"]) == ["config.yaml", "per_query.csv", "tables/claims.csv", "tables/t0.csv", "tables/t0.md",
                                         "tables/t1.csv", "tables/t1.md"]
    assert json.loads((dest / publish.MANIFEST).read_text()) == json.loads(json.dumps(manifest))
    readme = (dest / "README.md").read_text()
    assert "commit `c0ffee`" in readme and "3,330 s wall (56 min) over its 2 Snakemake invocation(s)" in readme and "[t1](tables/t1.md)" in readme
    (run / "results" / "tables" / "t1.md").unlink()
    publish.publish(run, dest, config)  # publishing again replaces the folder, leaving nothing beside it
    assert not (dest / "tables" / "t1.md").exists() and sorted(p.name for p in dest.parent.iterdir()) == ["study"]


def test_a_run_that_trained_publishes_its_loss_curves(tmp_path):
    """Each training run's logged steps, one CSV with the model's name first (the curves differ in columns:
    a pointwise run logs its penalty, a listwise one its rank and LM terms)."""
    run, config = _run(tmp_path, [_record()])
    train = run / "results" / "metrics" / "train"
    train.mkdir(parents=True)
    pl.DataFrame({"step": [1, 2], "loss": [2.0, 1.5], "rank_loss": [1.0, 0.5]}).write_parquet(train / "first-s1.parquet")
    pl.DataFrame({"step": [1], "loss": [0.7], "consistency": [0.1]}).write_parquet(train / "ocsft-s1.parquet")
    dest = tmp_path / "published"
    manifest = publish.publish(run, dest, config)
    curves = pl.read_csv(dest / publish.LOSS_CURVES)
    assert curves.columns[:3] == ["model", "step", "loss"] and "loss_curves.csv" in manifest["files"]
    assert curves["model"].to_list() == ["first-s1", "first-s1", "ocsft-s1"]
    assert curves["consistency"].to_list() == [None, None, 0.1] and "`loss_curves.csv`" in (dest / "README.md").read_text()


@pytest.mark.parametrize("records, message", [
    ([_record(dirty=True)], "uncommitted changes"),
    ([_record("c0ffee"), _record("decade")], "2 states of the code"),
    ([_record(), _record(kernels="native")], "torch's avx2/native CPU kernels, the published studies with avx2's"),
    ([_record(kernels="avx512")], "rerun with ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 set"),
])
def test_results_from_a_dirty_checkout_or_from_two_commits_are_refused(tmp_path, records, message):
    run, config = _run(tmp_path, records)
    dest = tmp_path / "out"
    with pytest.raises(PosbiasError, match=message):
        publish.publish(run, dest, config)
    assert not dest.exists() and not list(tmp_path.glob(".out*"))


def test_the_command_says_what_is_missing_in_one_line(tmp_path, capsys):
    assert publish.main([str(tmp_path), str(tmp_path / "out"), "--config", str(tmp_path / "none.yaml")]) == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    (tmp_path / "c.yaml").write_text(CONFIG_TEXT)
    assert publish.main([str(tmp_path), str(tmp_path / "out"), "--config", str(tmp_path / "c.yaml")]) == 1
    assert "no tables; run the workflow" in capsys.readouterr().err
