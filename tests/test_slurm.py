"""`snakemake --profile slurm`, as users type it, against a real one-node SLURM cluster (tests/slurm/cluster.sh).

Installs the user profile with `./posbias.sh profile` (into a scratch HOME), runs a tiny config to
completion through real sbatch jobs (CPU rules and a 2-GPU torchrun training job on fake GPUs; tables
and figures as local rules), checks the job records in sacct against what the workflow profile
(profiles/default) asks for, then requeues a running training job with `scontrol requeue` (what a
preemption with requeue does) and checks that the workflow completes on its own, the restarted job
resumed from its checkpoint, and the model equals that of an uninterrupted run. Needs root on Debian
(the harness installs slurm packages); skipped elsewhere. Test-only settings are command-line
overrides here, never edits of the profiles.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.conftest import REPO
from tests.phases import phase

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
# Overrides for a one-node test cluster: poll early, few parallel jobs, short latency wait; --verbose
# logs each sbatch call.
TEST_OVERRIDES = ["--slurm-init-seconds-before-status-checks", "5", "--jobs", "4", "--latency-wait", "5", "--verbose"]
HARD_TIMEOUT = 900  # seconds per snakemake call; `timeout -k` also ends a hung plugin

SYNTHETIC = {"n_docs": 300, "n_test_queries": 8, "n_train_queries": 24, "doc_length": [10, 20]}
CONFIG = {
    "seed": 7,
    "device": "cpu",
    "threads": 1,
    "datasets": {
        "tiny": {"source": "synthetic", "split": "test", "retrievers": ["bm25"], **SYNTHETIC},
        "tiny-train": {"source": "synthetic", "split": "train", "retrievers": ["bm25"], **SYNTHETIC},
    },
    "models": {"tiny-lm": {"kind": "causal_lm", "build": "tiny",
                           "tiny": {"vocab_size": 600, "hidden": 32, "layers": 2, "heads": 2, "max_length": 2048,
                                    "train_on": "tiny"}}},
    "retrievers": {"bm25": {"kind": "bm25", "depth": 100}},
    "reranking": {"experiments": [{"model": "tiny-ft", "dataset": "tiny", "retriever": "bm25", "depth": 10,
                                   "queries": 4, "orders": ["original"]}]},
    "training": {"tiny-ft": {"method": "first", "base_model": "tiny-lm", "data": "tiny-train", "gpus": 2,
                             "hyper": {"learning_rate": 0.003, "max_steps": 6, "batch_size": 2, "grad_accum": 1,
                                       "save_steps": 3, "logging_steps": 1}}},
    "evaluation": {"measures": ["nDCG@10"]},
}


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("the SLURM harness needs root on a Debian machine (it installs slurm packages)")
    with phase("SLURM: the local cluster's start and stop"):
        out = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    yield
    with phase("SLURM: the local cluster's start and stop"):
        subprocess.run([str(CLUSTER), "stop"], capture_output=True, text=True, timeout=300)


def _config(workdir: Path, **training_hyper) -> Path:
    cfg = yaml.safe_load(yaml.safe_dump(CONFIG))
    cfg["training"]["tiny-ft"]["hyper"].update(training_hyper)
    path = workdir / "slurm-test.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _snakemake_cmd(workdir: Path, config: Path, *args: str) -> list[str]:
    return ["timeout", "-k", "30", str(HARD_TIMEOUT), sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
            "-d", str(workdir), "--configfile", str(config), "--replace-workflow-config", *args]


def _user_env(home: Path) -> dict[str, str]:
    """The environment of a user whose HOME is ``home``, with the named profile `slurm` installed there."""
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    out = subprocess.run(["bash", str(REPO / "posbias.sh"), "profile"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0 and (home / ".config" / "snakemake" / "slurm" / "config.v8+.yaml").is_file(), out
    return env


def _sacct(since: str) -> pl.DataFrame:
    fields = ["JobID", "Comment", "State", "AllocTRES", "ReqMem", "Timelimit", "Elapsed"]
    out = subprocess.run(["sacct", "-X", "--parsable2", "--noheader", "--starttime", since,
                          f"--format={','.join(fields)}"], capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in out.stdout.splitlines() if line.strip()]
    return pl.DataFrame(rows, schema=fields, orient="row").filter(pl.col("Comment").str.starts_with("rule_"))


def _show(jobs: pl.DataFrame) -> None:
    """The sacct records as a table in the test output (run with -s to see it)."""
    with pl.Config(tbl_rows=-1, fmt_str_lengths=70, tbl_width_chars=250, tbl_hide_dataframe_shape=True,
                   tbl_hide_column_data_types=True, tbl_formatting="MARKDOWN"):
        print(jobs)


def _tres(value: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


@dataclass
class SlurmRun:
    """The tiny config run to completion through sbatch jobs: its folder, console, sacct records."""

    workdir: Path
    env: dict[str, str]
    stderr: str
    console: str
    jobs: pl.DataFrame
    rules: list[str]


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory) -> SlurmRun:
    """`snakemake --profile slurm` as a user types it, once for every claim about it below."""
    base = tmp_path_factory.mktemp("slurm")
    workdir = base / "work"
    workdir.mkdir()
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    env = _user_env(base / "home")
    with phase("SLURM: the workflow through sbatch jobs"):
        out = subprocess.run(_snakemake_cmd(workdir, _config(workdir), "--profile", "slurm", *TEST_OVERRIDES),
                             capture_output=True, text=True, timeout=HARD_TIMEOUT + 60, env=env)
    if out.returncode != 0:
        pytest.fail(f"the workflow through SLURM failed:\n{out.stderr[-5000:]}", pytrace=False)
    jobs = _sacct(since)
    _show(jobs)
    rules = jobs["Comment"].str.extract(r"^rule_([a-z_]+?)(?:_wildcards_.*)?$").to_list()
    return SlurmRun(workdir, env, out.stderr, out.stdout + out.stderr, jobs, rules)


def test_the_slurm_profile_runs_the_workflow_to_completion(slurm_run):
    workdir = slurm_run.workdir
    assert "posbias: done" in slurm_run.stderr
    assert (workdir / "results" / "models" / "tiny-ft" / "model.safetensors").is_file()
    assert (workdir / "results" / "tables" / "rerank.md").is_file()
    assert "--signal=TERM@600" in slurm_run.stderr  # the profile's preemption warning reached sbatch


def test_every_job_is_its_own_sbatch_job_and_tables_stay_local(slurm_run):
    rules = slurm_run.rules
    assert (slurm_run.jobs["State"] == "COMPLETED").all()
    planned = {"prepare_dataset": 2, "listwise_set": 1, "build_tiny_model": 1, "index": 2, "retrieve": 2,
               "evaluate_run": 2, "augment": 3, "train": 1, "rerank": 1, "rerank_summary": 1, "plan": 1}
    assert {r: rules.count(r) for r in set(rules)} == planned  # every job its own sbatch job; tables local
    assert "localrule paper_table:" in slurm_run.console


def test_each_job_gets_the_resources_the_profile_asks_for(slurm_run):
    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.v8+.yaml").read_text())
    threads = yaml.safe_load((REPO / "profiles" / "slurm" / "config.v8+.yaml").read_text())["set-threads"]
    by_rule = {r: row for r, row in zip(slurm_run.rules, slurm_run.jobs.iter_rows(named=True))}
    for rule in ("prepare_dataset", "index", "retrieve", "rerank", "train"):
        mem = int(str(profile["set-resources"][rule]["mem_mb"]).removesuffix(" * attempt"))  # the first attempt
        assert by_rule[rule]["ReqMem"] in (f"{mem}M", f"{mem // 1024}G")
    train, index, prep = (_tres(by_rule[r]["AllocTRES"]) for r in ("train", "index", "prepare_dataset"))
    assert train["gres/gpu"] == "2" and train["cpu"] == str(threads["train"])
    assert "gres/gpu" not in index and index["cpu"] == str(threads["index"])
    assert "gres/gpu" not in prep and prep["cpu"] == "1"
    assert by_rule["train"]["Timelimit"] == "1-00:00:00" and by_rule["evaluate_run"]["Timelimit"] == "00:30:00"
    log = (slurm_run.workdir / "logs" / "train" / "tiny-ft.log").read_text()
    assert "torch.distributed.run --standalone --nproc-per-node=2" in log


@dataclass
class Preemption:
    job: str
    stderr: str
    attempts: pl.DataFrame


@pytest.fixture(scope="module")
def preempted(slurm_run) -> Preemption:
    """Preemption with requeue: a longer training run is requeued mid-training (SIGTERM, back to the queue,
    restarted under the same job id); the workflow completes on its own."""
    workdir = slurm_run.workdir
    longer = _config(workdir, max_steps=40, save_steps=1000, logging_steps=1)
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    with phase("SLURM: a training job requeued mid-run"):
        run = subprocess.Popen(_snakemake_cmd(workdir, longer, "--profile", "slurm", *TEST_OVERRIDES,
                                              "results/models/tiny-ft"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=slurm_run.env)
        train_log = workdir / "logs" / "train" / "tiny-ft.log"
        deadline = time.time() + 600
        job = None
        while time.time() < deadline and run.poll() is None:
            text = train_log.read_text(errors="replace") if train_log.is_file() else ""
            if "| 8/40 [" in text:
                queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True,
                                       text=True, check=True).stdout.split()
                job = next(line.split("|")[0] for line in queue if line.split("|")[1].startswith("rule_train"))
                subprocess.run(["scontrol", "requeue", job], check=True)
                break
            time.sleep(0.5)
        assert job is not None, "the training job never reached step 8"
        _, err = run.communicate(timeout=HARD_TIMEOUT)
    assert run.returncode == 0, err[-5000:]
    attempts = _sacct(since).filter(pl.col("Comment").str.starts_with("rule_train"))
    _show(attempts)
    return Preemption(job, err, attempts)


def test_a_requeued_training_job_restarts_under_the_same_id(preempted):
    assert "--requeue" in preempted.stderr  # the user profile submits requeueable jobs
    assert preempted.attempts["State"].to_list() == ["COMPLETED"]
    assert preempted.attempts["JobID"].to_list() == [preempted.job]  # same job, restarted


def test_the_restarted_job_resumes_from_the_checkpoint_written_on_sigterm(slurm_run, preempted):
    workdir = slurm_run.workdir
    record = [json.loads(line) for line in
              (workdir / "results" / "checkpoints" / "tiny-ft" / "preemptions.jsonl").read_text().splitlines()]
    stopped = record[0]["stopped_after_step"]
    meta = json.loads((workdir / "results" / "models" / "tiny-ft" / "posbias_training.json").read_text())
    assert len(record) == 1 and 8 <= stopped < 40
    assert meta["resumed_from"] == stopped and meta["steps"] == 40
    assert f"checkpoint-{stopped}" in (workdir / "logs" / "train" / "tiny-ft.log").read_text()
    print(f"requeued after step {stopped}; the restarted job resumed from checkpoint-{meta['resumed_from']}")


def test_the_resumed_model_equals_an_uninterrupted_run(slurm_run, preempted):
    """The same training, uninterrupted and without SLURM, gives the same model."""
    from safetensors.torch import load_file

    workdir = slurm_run.workdir
    longer = _config(workdir, max_steps=40, save_steps=1000, logging_steps=1)
    resumed_model = load_file(workdir / "results" / "models" / "tiny-ft" / "model.safetensors")
    resumed_curve = pl.read_parquet(workdir / "results" / "metrics" / "train" / "tiny-ft.parquet")
    shutil.rmtree(workdir / "results" / "checkpoints" / "tiny-ft")
    out = subprocess.run(_snakemake_cmd(workdir, longer, "--cores", "2", "--forcerun", "train",
                                        "results/models/tiny-ft"), capture_output=True, text=True,
                         timeout=HARD_TIMEOUT + 60)
    assert out.returncode == 0, out.stderr[-5000:]
    straight = load_file(workdir / "results" / "models" / "tiny-ft" / "model.safetensors")
    straight_curve = pl.read_parquet(workdir / "results" / "metrics" / "train" / "tiny-ft.parquet")
    diff = max(float((resumed_model[n] - straight[n]).abs().max()) for n in straight)
    final_loss = (resumed_curve["loss"][-1], straight_curve["loss"][-1])
    print(f"max weight difference {diff:.2e}; final loss resumed {final_loss[0]:.6f} vs uninterrupted "
          f"{final_loss[1]:.6f}")
    assert diff < 1e-4 and abs(final_loss[0] - final_loss[1]) < 1e-4
