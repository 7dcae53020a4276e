"""The ``posbias`` command: every subcommand's --help, the audit's config, check, compare's metric deltas; and
``python -m posbias.<module> --help`` of every module entry point (exit 0)."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from posbias import cli, compare
from posbias import config as pbconfig
from tests.conftest import REPO

runner = CliRunner()
SUBCOMMANDS = ("run", "check", "plan", "audit", "provenance", "compare")


@pytest.mark.parametrize("args", [[], *([c] for c in SUBCOMMANDS)], ids=["posbias", *SUBCOMMANDS])
def test_every_help_exits_0(args):
    result = runner.invoke(cli.app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize("module", ["config", "dry_plan", "provenance", "compare", "publish", "standins"])
def test_every_module_entry_point_has_help(module):
    out = subprocess.run([sys.executable, "-m", f"posbias.{module}", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stderr[-2000:]


def test_the_console_script_is_declared():
    assert 'posbias = "posbias.cli:main"' in (REPO / "pyproject.toml").read_text()


@pytest.mark.parametrize("model", ["smollm2", "Qwen/Qwen3-0.6B"])
def test_the_audit_writes_the_standard_protocol_as_a_valid_config(model, tmp_path):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(cli.audit_config(model, "dl20", 10, "transformers")))
    cfg = pbconfig.load(path, files=False)
    (experiment,) = cfg["reranking"]["experiments"]
    assert experiment["orders"] == ["original", "shuffled-0", "shuffled-1", "shuffled-2", "position-1",
                                    "position-10", "position-20"]
    assert experiment["queries"] == 10 and experiment["debias"] == ["none", "permsc@3", "capcal"]
    audited = cfg["models"]["audited"]
    assert ("gguf" in audited) == (model == "smollm2") and audited["mode"] == "first"


def test_an_unknown_collection_is_one_line(tmp_path):
    result = runner.invoke(cli.app, ["audit", "smollm2", "--collection", "msmarco", "--directory", str(tmp_path)])
    assert result.exit_code == 2 and "'msmarco': choose one of dl19, dl20" in result.output


def test_run_passes_the_config_alone_and_the_rest_to_snakemake():
    command = cli.snakemake_command(Path("my.yaml"), Path("out"), ["-n", "reranking"])
    assert command[command.index("--directory") + 1] == "out" and command[-2:] == ["-n", "reranking"]
    assert "--replace-workflow-config" in command and command[command.index("--cores") + 1] == "2"
    assert "--cores" not in cli.snakemake_command(Path("my.yaml"), Path("."), ["--profile", "slurm"])


@pytest.mark.parametrize("flag, kernels", [([], None), (["--published-kernels"], "avx2")])
def test_run_computes_with_the_published_kernels_when_asked(monkeypatch, flag, kernels):
    calls = []
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")  # tests/conftest.py sets it for the suite
    monkeypatch.setattr(cli.subprocess, "call", lambda command, env=None: calls.append(env) or 0)
    result = runner.invoke(cli.app, ["run", str(REPO / "config" / "config.yaml"), *flag, "-n"])
    assert result.exit_code == 0 and len(calls) == 1, result.output
    assert (calls[0] or os.environ).get("ATEN_CPU_CAPABILITY") == kernels


def test_check_says_ok_for_the_default_config():
    result = runner.invoke(cli.app, ["check", str(REPO / "config" / "config.yaml")])
    assert result.exit_code == 0 and ": ok (" in result.output, result.output


def test_compare_prints_the_rerank_metrics_deltas(tmp_path):
    keys = {"model": ["m", "m"], "dataset": ["d", "d"], "retriever": ["r", "r"], "debias": ["none", "capcal"]}
    for folder, base in (("a", 0.5), ("b", 0.6)):
        (tmp_path / folder / "tables").mkdir(parents=True)
        pl.DataFrame({**keys, "ndcg10_original": [base, base + 0.1], "ndcg10_shuffled_mean": [0.4, 0.4],
                      "tau_psi": [0.3, 0.2], "psi": [1.0, 0.5]}).write_csv(tmp_path / folder / "tables" / "rerank.csv")
    deltas = compare.metric_deltas(tmp_path / "a", tmp_path / "b")
    assert deltas["Δ ndcg10_original"].to_list() == pytest.approx([0.1, 0.1])
    assert deltas["Δ tau_psi"].to_list() == [0.0, 0.0]
    result = runner.invoke(cli.app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1 and "rerank metrics, B − A" in result.output  # the tables differ


def test_run_names_the_line_of_a_yaml_syntax_error(tmp_path):
    """Snakemake reports a --configfile that does not parse without its line; `posbias run` says it first."""
    config = tmp_path / "my.yaml"
    config.write_text("datasets:\n  dl20:\n    source: imported\n   qrels: x\n")
    result = runner.invoke(cli.app, ["run", str(config), "-n"])
    assert result.exit_code == 2 and f"{config}:4" in result.output, result.output


def _side_config(strength: float) -> dict:
    """A minute's workflow: the simulated listwise reranker, with a positional prior of this strength, on five toy
    queries in the original order and one shuffle."""
    return {"config_version": 2,
            "datasets": {"toy": {"source": "toy", "split": "test", "n_test_queries": 5, "retrievers": ["biased"]}},
            "models": {"sim": {"kind": "simulated", "prior": "linear", "strength": strength, "noise": 0.5}},
            "retrievers": {"biased": {"kind": "oracle", "noise": 1.0, "depth": 20}},
            "reranking": {"depth": 20, "experiments": [{"model": "sim", "dataset": "toy", "retriever": "biased",
                                                        "orders": ["original", "shuffled-0"]}]},
            "evaluation": {"measures": ["nDCG@10"]}}


@pytest.mark.workflow
def test_two_configs_run_side_by_side_each_in_its_directory(tmp_path):
    """`posbias run CONFIG --directory DIR`: each config's results, logs and benchmarks under its own folder, so a
    second config neither overwrites nor reruns the first's (issue 54)."""
    tables = {}
    for name, strength in (("flat", 0.0), ("biased", 3.0)):
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(_side_config(strength)))
        out = subprocess.run([sys.executable, "-m", "posbias.cli", "run", str(config), "--directory",
                              str(tmp_path / name), "results/tables/rerank.csv"],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        tables[name] = tmp_path / name / "results" / "tables" / "rerank.csv"
    assert not (tmp_path / "results").exists()  # nothing in the folder the commands ran from
    flat, biased = (pl.read_csv(tables[n]).row(0, named=True) for n in ("flat", "biased"))  # both kept
    assert flat["model"] == biased["model"] == "sim"
    assert flat != biased  # each folder holds its own config's numbers
    assert (tmp_path / "flat" / "logs").is_dir() and (tmp_path / "biased" / "benchmarks").is_dir()


def test_a_configs_relative_paths_are_read_from_where_the_command_runs(tmp_path):
    """`posbias run CONFIG --directory DIR` with a dataset's files relative to the folder the command runs in: they
    are made absolute in DIR/config.yaml (one line says so), so the run in DIR finds them (a dry run plans the
    data jobs); an HF id and a path only DIR holds stay as written."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.tsv").write_text("q1\tbm25 ranks\n")
    (data / "qrels.txt").write_text("q1 0 d1 1\n")
    (data / "corpus.tsv").write_text("d1\tbm25 ranks passages\nd2\tanother passage\n")
    config = {"config_version": 2,
              "datasets": {"mine": {"source": "trec", "topics": "data/topics.tsv", "qrels": "data/qrels.txt",
                                    "corpus": "data/corpus.tsv", "retrievers": ["bm25"]}},
              "models": {"hub": {"kind": "causal_lm", "path": "Qwen/Qwen3-0.6B", "mode": "first"}},
              "retrievers": {"bm25": {"kind": "bm25"}}, "reranking": {"experiments": []}}
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    copy = yaml.safe_load(yaml.safe_dump(config))
    assert cli.resolved_paths(copy, tmp_path) == ["data/topics.tsv", "data/qrels.txt",
                                                                            "data/corpus.tsv"]
    assert copy["datasets"]["mine"]["qrels"] == str(data / "qrels.txt")
    assert copy["models"]["hub"]["path"] == "Qwen/Qwen3-0.6B"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    out = subprocess.run([sys.executable, "-m", "posbias.cli", "run", str(path), "--directory", "runs/mine", "-n",
                          "data"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "posbias: run: 3 relative path(s) read from" in out.stderr
    written = yaml.safe_load((tmp_path / "runs" / "mine" / "config.yaml").read_text())
    assert written["datasets"]["mine"]["topics"] == str(data / "topics.tsv")
    assert "prepare_texts" in out.stdout and "prepare_qrels" in out.stdout  # the data jobs, their files found
