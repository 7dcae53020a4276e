"""OC-SFT self-distilled from a language-model teacher (config/examples/ocsft-selfdistil.yaml), run once
per session (``tests/runs.py``): the base Grades scorer labels its own training windows (ocsft.teacher:
null), OC-SFT and single order train on them and are evaluated for stability; the compute plan counts
the teacher's calls and tokens exactly."""

from __future__ import annotations

import json

import polars as pl
import pytest

pytestmark = pytest.mark.workflow


def _stats(run) -> dict:
    return json.loads(run.text("results", "silver", "tiny-train", "tiny-grades", "t0.stats.json"))


def test_the_base_scorer_labels_its_own_training_windows(selfdistil_run):
    silver = pl.read_parquet(selfdistil_run.path("results", "silver", "tiny-train", "tiny-grades", "t0.parquet"))
    assert silver["query_id"].n_unique() == 24 and silver["score"].is_between(0, 1).all()
    assert silver["score"].n_unique() > 100  # the model's expected grades, not qrels grades / 3
    assert _stats(selfdistil_run)["teacher_calls"] > 0


def test_ocsft_trains_on_the_self_distilled_labels_and_is_evaluated(selfdistil_run):
    curve = pl.read_parquet(selfdistil_run.path("results", "metrics", "train", "tiny-ocsft.parquet"))
    assert (curve["consistency_loss"] > 0).all()
    assert "| tiny-ocsft | tiny · bm25 | 1 | 1 | 8 (2) |" in selfdistil_run.text("results", "tables", "stability.md")


def test_the_plan_counts_the_teachers_calls_and_tokens_exactly(selfdistil_run):
    stats = _stats(selfdistil_run)
    teacher = selfdistil_run.table("plan_check").filter(pl.col("family") == "silver_labels").to_dicts()
    assert [(r["model"], r["calls"], r["calls_actual"], r["prompt_tokens"] == r["prompt_tokens_actual"])
            for r in teacher] == [("tiny-grades", stats["teacher_calls"], stats["teacher_calls"], True)]
