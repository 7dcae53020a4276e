"""The trainer: readout position, a real optimisation step, LoRA, resume after a kill, DeepSpeed on CPU."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from posbias.data import synthetic
from posbias.models import build_tiny_causal_lm
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.lm import LMSpec, identifier_token_ids
from posbias.errors import PosbiasError
from posbias.training import TrainSpec, train
from posbias.training.spec import check_warmup
from posbias.training.listwise import (
    ListwiseCollator,
    encode_instances,
    objective,
    target_text,
)

SPEC = synthetic.SyntheticSpec(n_docs=300, n_test_queries=2, n_train_queries=16, doc_length=(10, 20))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    coll = synthetic.generate(SPEC, "train")
    build_tiny_causal_lm(coll.corpus["text"].to_list(), root / "base", vocab_size=600, hidden=32, layers=2,
                         heads=2, max_length=2048, seed=0)
    return root, coll.listwise


def test_target_text():
    assert target_text(["a", "b", "c"], ["b", "c", "a"]) == "B] > [C] > [A]"


def test_rank_scores_are_read_where_inference_reads(setup):
    root, listwise = setup
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(root / "base")
    model = AutoModelForCausalLM.from_pretrained(root / "base")
    example = encode_instances(tokenizer, listwise.head(1), 300, 2048)[0]
    batch = ListwiseCollator(tokenizer.pad_token_id)([example])
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    ids = identifier_token_ids(tokenizer)
    train_scores = logits[0, batch["rank_position"][0], ids].tolist()
    rec = listwise.row(0, named=True)
    window = Window(rec["query_id"], rec["query"], rec["doc_ids"], rec["texts"])
    infer_scores = FirstReranker(LMSpec(str(root / "base"))).rank([window])[0].scores
    np.testing.assert_allclose(train_scores, infer_scores, atol=1e-4)
    # the labelled span is exactly "[" + the ranking string + EOS
    labelled = [t for t in example["labels"] if t != -100]
    assert tokenizer.decode(labelled, skip_special_tokens=True) == "[" + target_text(rec["doc_ids"], rec["teacher_ranking"])
    loss, parts = objective(logits, batch, ids, TrainSpec.create(method="first"), None)
    assert torch.isfinite(loss) and set(parts) == {"rank_loss", "lm_loss"}
    with pytest.raises(ValueError, match="needs a 20x20 propensity"):
        objective(logits, batch, ids, TrainSpec.create(method="debiasfirst"), None)


def test_training_lowers_the_loss_and_the_model_reloads(setup, tmp_path):
    root, listwise = setup
    spec = TrainSpec.create(method="rank_ips_lm", learning_rate=3e-3, max_steps=12, batch_size=4, grad_accum=1,
                     save_steps=100, logging_steps=1)
    omega = np.full((20, 20), 1 / 400)
    curve = train(str(root / "base"), listwise, spec, tmp_path / "work", tmp_path / "out", omega)
    assert curve.height == 12
    assert curve["loss"].tail(3).mean() < curve["loss"].head(3).mean()
    # each logged step reads 4 lists' prompt tokens (attention mask ones) at some positive rate
    assert (curve["tokens_per_s"] > 0).all() and curve["tokens_per_s"].is_finite().all()
    reranker = FirstReranker(LMSpec(str(tmp_path / "out")))
    rec = listwise.row(0, named=True)
    result = reranker.rank([Window("q", rec["query"], rec["doc_ids"], rec["texts"])])[0]
    assert sorted(result.order) == list(range(20))


def test_lora_adapters_are_merged(setup, tmp_path):
    root, listwise = setup
    spec = TrainSpec.create(method="first", learning_rate=1e-2, max_steps=2, batch_size=2, grad_accum=1, save_steps=100,
                     lora={"r": 4, "alpha": 8, "dropout": 0.0,
                           "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]})
    train(str(root / "base"), listwise.head(4), spec, tmp_path / "work", tmp_path / "out")
    names = set(__import__("safetensors.torch", fromlist=["x"]).load_file(tmp_path / "out" / "model.safetensors"))
    assert not any("lora" in n for n in names)  # a plain checkpoint, loadable without peft


def test_unmerged_lora_adapters_rerank_as_the_merged_model_does(setup, tmp_path):
    """lora.merge false: the folder holds the adapters alone (naming the base), and the reranker, loading it
    onto the base, reads the scores of the same run merged."""
    import json

    root, listwise = setup
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    scores = {}
    for merge in (True, False):
        spec = TrainSpec.create(method="first", learning_rate=1e-2, max_steps=2, batch_size=2, grad_accum=1,
                                save_steps=100, lora={**lora, "merge": merge})
        out = tmp_path / f"out-{merge}"
        train(str(root / "base"), listwise.head(4), spec, tmp_path / f"work-{merge}", out)
        rec = listwise.row(0, named=True)
        window = Window(rec["query_id"], rec["query"], rec["doc_ids"], rec["texts"])
        scores[merge] = FirstReranker(LMSpec(str(out))).rank([window])[0].scores
    assert not (out / "model.safetensors").exists() and (out / "adapter_model.safetensors").is_file()
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(root / "base")
    np.testing.assert_allclose(scores[False], scores[True], atol=1e-5)
    assert not np.allclose(scores[True], FirstReranker(LMSpec(str(root / "base"))).rank([window])[0].scores, atol=1e-4)


_KILLABLE = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO)
from posbias.data import synthetic
from posbias.training import TrainSpec, train
from tests.test_training import SPEC
listwise = synthetic.generate(SPEC, "train").listwise
spec = TrainSpec.create(method="first", learning_rate=3e-3, max_steps=10, batch_size=4, grad_accum=1,
                 save_steps=int(sys.argv[4]) if len(sys.argv) > 4 else 2, save_total_limit=10, logging_steps=1)
train(sys.argv[1], listwise, spec, Path(sys.argv[2]), Path(sys.argv[3]))
"""


def test_a_training_step_out_of_memory_is_one_line_naming_what_to_lower(setup, tmp_path, monkeypatch):
    """A step that cannot allocate (CUDA's OutOfMemoryError here; torch's CPU allocator raises a RuntimeError)
    stops the run with one line naming the step, the batch size and accumulation to change, and where the
    checkpoints are; no model is written. Other runtime errors pass through unchanged."""
    from posbias.training import run as run_module

    root, listwise = setup
    base = run_module.trainer_class()

    class Exhausted(base):
        def training_step(self, *args, **kwargs):
            if self.state.global_step == 2:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return super().training_step(*args, **kwargs)

    monkeypatch.setattr(run_module, "trainer_class", lambda: Exhausted)
    spec = TrainSpec.create(method="first", learning_rate=3e-3, max_steps=10, batch_size=4, grad_accum=1,
                            save_steps=1, save_total_limit=10, logging_steps=1)
    with pytest.raises(PosbiasError, match=r"^training step 3 ran out of memory \(CUDA out of memory\. Tried to "
                                           r"allocate 2\.00 GiB\); lower hyper\.batch_size \(now 4\) and raise "
                                           r"hyper\.grad_accum \(now 1\)") as caught:
        train(str(root / "base"), listwise, spec, tmp_path / "work", tmp_path / "out")
    assert "\n" not in str(caught.value) and str(tmp_path / "work") in str(caught.value)
    assert not (tmp_path / "out").exists() and (tmp_path / "work" / "checkpoint-2").is_dir()
    assert run_module.out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                                                 "can't allocate memory: you tried to allocate 1099511627776 bytes."))
    assert not run_module.out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def sigterm_after(args: list[str], env: dict, progress: str, timeout: float) -> None:
    """Start a training process, send it SIGTERM once its stderr shows ``progress`` (tqdm's ``| n/N [``), and
    check that it stopped as a preempted run does: non-zero, saying after which step."""
    import threading

    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(256), "")), daemon=True)
    reader.start()
    deadline = time.time() + timeout
    while progress not in "".join(err) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=timeout)
    reader.join(timeout=10)
    text = "".join(err)
    assert proc.returncode != 0 and "Preempted: SIGTERM: stopped after step" in text, text[-2000:]


def test_sigterm_checkpoints_the_current_step_and_the_rerun_resumes_from_it(setup, tmp_path):
    """Preemption: SIGTERM mid-training writes a checkpoint at the current step (no periodic saves here),
    exits non-zero, and the rerun resumes there and ends with the model of an uninterrupted run."""
    root, _ = setup
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    args = [sys.executable, "-c", _KILLABLE, str(root / "base")]
    sigterm_after(args + [str(tmp_path / "work"), str(tmp_path / "out"), "1000"], env, "| 3/10 [", 240)
    from posbias.training.checkpoints import last_checkpoint

    step = int(Path(last_checkpoint(tmp_path / "work")).name.split("-")[1])
    assert 3 <= step < 10 and not (tmp_path / "out").exists()
    rerun = subprocess.run(args + [str(tmp_path / "work"), str(tmp_path / "out"), "1000"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"resuming from {tmp_path / 'work' / f'checkpoint-{step}'}" in rerun.stderr
    import json

    assert json.loads((tmp_path / "work" / "preemptions.jsonl").read_text())["stopped_after_step"] == step
    assert json.loads((tmp_path / "out" / "posbias_training.json").read_text())["resumed_from"] == step
    straight = subprocess.run(args + [str(tmp_path / "work2"), str(tmp_path / "out2"), "1000"], env=env,
                              capture_output=True, text=True, timeout=300)
    assert straight.returncode == 0, straight.stderr[-2000:]
    a, b = _weights(tmp_path / "out"), _weights(tmp_path / "out2")
    assert max(float((a[n] - b[n]).abs().max()) for n in a) < 1e-4


def test_a_killed_run_resumes_from_its_checkpoint(setup, tmp_path):
    root, listwise = setup
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    args = [sys.executable, "-c", _KILLABLE, str(root / "base")]
    proc = subprocess.Popen(args + [str(tmp_path / "work"), str(tmp_path / "out")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not (tmp_path / "work" / "checkpoint-4" / "trainer_state.json").is_file() and time.time() < deadline \
            and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "work" / "checkpoint-4").is_dir() and not (tmp_path / "out").exists()
    from posbias.training.checkpoints import last_checkpoint

    killed_at = int(Path(last_checkpoint(tmp_path / "work")).name.split("-")[1])
    assert killed_at < 10
    rerun = subprocess.run(args + [str(tmp_path / "work"), str(tmp_path / "out")], env=env, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"resuming from {tmp_path / 'work' / f'checkpoint-{killed_at}'}" in rerun.stderr
    straight = subprocess.run(args + [str(tmp_path / "work2"), str(tmp_path / "out2")], env=env,
                              capture_output=True, text=True, timeout=300)
    assert straight.returncode == 0, straight.stderr[-2000:]
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "out" / "model.safetensors"), load_file(tmp_path / "out2" / "model.safetensors")
    assert max(float((a[n] - b[n]).abs().max()) for n in a) < 1e-4


def test_deepspeed_zero2_on_cpu(setup, tmp_path):
    """ZeRO-2 through the HF Trainer with the project's config, one CPU process. DeepSpeed's CPU backend
    JIT-compiles its shared-memory all-reduce kernel when it starts (about 100 s of one core on a fresh machine,
    C++ the test does not exercise: one process reduces nothing, and a GPU node's CUDA backend never builds it),
    so the test's process marks that kernel incompatible, the gate DeepSpeed itself falls back to torch.distributed
    through."""
    root, listwise = setup
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    code = f"""
import torch
from pathlib import Path
import deepspeed.ops
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
from posbias.data import synthetic
from posbias.training import TrainSpec, train
from tests.test_training import SPEC
listwise = synthetic.generate(SPEC, "train").listwise
spec = TrainSpec.create(method="first", learning_rate=1e-3, max_steps=2, batch_size=2, grad_accum=2, save_steps=100,
                 logging_steps=1, deepspeed={str(Path(__file__).resolve().parents[1] / 'config' / 'deepspeed' / 'zero2.json')!r})
curve = train({str(root / 'base')!r}, listwise, spec, Path({str(tmp_path / 'work')!r}), Path({str(tmp_path / 'out')!r}))
print("STEPS", curve.height)
"""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STEPS 2" in out.stdout
    assert "DeepSpeed" in out.stderr or "deepspeed" in out.stderr.lower()
    assert (tmp_path / "out" / "config.json").is_file()


def test_torchrun_launch_with_two_processes_on_cpu(setup, tmp_path):
    """The multi-GPU path (one process per device under torchrun), exercised with 2 CPU processes (gloo)."""
    root, listwise = setup
    from posbias import schemas
    from posbias.training import launch_distributed

    spec = TrainSpec.create(method="first", learning_rate=1e-3, max_steps=2, batch_size=2, grad_accum=1, save_steps=100,
                     logging_steps=1)
    launch_distributed(2, str(root / "base"), listwise.head(8), spec, tmp_path / "work", tmp_path / "out",
                       None, tmp_path / "curve.parquet")
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert schemas.read(tmp_path / "curve.parquet", "loss_curve").height == 2


def test_an_incomplete_newest_checkpoint_is_skipped(tmp_path):
    from posbias.training.checkpoints import last_checkpoint

    for step, complete in ((2, True), (4, True), (6, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x")
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-4")
    assert last_checkpoint(tmp_path / "nothing") is None


def test_checkpoints_of_another_configuration_are_not_resumed(tmp_path):
    from posbias.training.checkpoints import claim_work_dir

    claim_work_dir(tmp_path / "w", {"lr": 1})
    (tmp_path / "w" / "checkpoint-5").mkdir()
    claim_work_dir(tmp_path / "w", {"lr": 1})
    assert (tmp_path / "w" / "checkpoint-5").is_dir()  # same run: resume
    claim_work_dir(tmp_path / "w", {"lr": 2})
    assert not (tmp_path / "w" / "checkpoint-5").exists()  # changed run: start afresh


@pytest.fixture(scope="module")
def pointwise(setup):
    """OC-SFT instances from qrels silver labels of the synthetic training queries' teacher lists."""
    from posbias.data.collection import grades_by_query

    coll = synthetic.generate(SPEC, "train")
    grades = grades_by_query(coll.qrels)
    rows = []
    for rec in coll.listwise.iter_rows(named=True):
        q = rec["query_id"]
        rel = grades.get(q, {})
        for w in range(2):
            docs = rec["doc_ids"][w * 10:(w + 1) * 10]
            texts = rec["texts"][w * 10:(w + 1) * 10]
            rows.append({"query_id": q, "window": w, "query": rec["query"], "doc_ids": docs, "texts": texts,
                         "targets": [min(rel.get(d, 0), 3) / 3 for d in docs]})
    import polars as pl

    return pl.DataFrame(rows)


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def test_a_warmup_longer_than_the_run_is_refused_before_the_first_step(setup, pointwise, tmp_path):
    """OC-SFT's λ must reach its target: 10 warm-up steps in a 3-step run would end at λ = 1.5 of 5."""
    spec = TrainSpec.create(method="ocsft", learning_rate=3e-3, max_steps=3, batch_size=4, grad_accum=1, save_steps=100,
                            logging_steps=1, views=2, consistency=5.0, consistency_warmup=10)
    with pytest.raises(PosbiasError, match=r"consistency_warmup: 10 steps .* 3 optimiser steps, so λ would end at 1.5"):
        train(str(setup[0] / "base"), pointwise, spec, tmp_path / "work", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list((tmp_path / "work").glob("checkpoint-*"))
    # a method without the penalty trains whatever its warm-up says; the planned steps are checked alike
    check_warmup("k", "single_order", 5.0, 10, 3)
    check_warmup("k", "ocsft", 5.0, 3, 3)
    with pytest.raises(PosbiasError, match="training.x.hyper.consistency_warmup: 500 steps .* 79 optimiser steps"):
        check_warmup("training.x.hyper.consistency_warmup", "ocsft", 5.0, 500, 79)


def test_ocsft_trains_and_logs_both_terms(setup, pointwise, tmp_path):
    root, _ = setup
    spec = TrainSpec.create(method="ocsft", learning_rate=3e-3, max_steps=6, batch_size=4, grad_accum=1, save_steps=100,
                     logging_steps=2, views=3, consistency=5.0, consistency_warmup=4)
    curve = train(str(root / "base"), pointwise, spec, tmp_path / "work", tmp_path / "out")
    assert curve.height == 3 and (curve["tokens_per_s"] > 0).all()
    assert curve["supervised_loss"].is_not_nan().all() and (curve["consistency_loss"] > 0).all()
    assert curve["rank_loss"].is_nan().all()
    from posbias.scoring import GradesScorer
    from posbias.rerankers.lm import LMSpec as Spec

    rec = pointwise.row(0, named=True)
    scores = GradesScorer(Spec(str(tmp_path / "out")), window=20).rank([Window(rec["query_id"], rec["query"], rec["doc_ids"],
                                                                    rec["texts"])])[0].scores
    assert len(scores) == 10 and all(0 <= s <= 1 for s in scores)


def test_ocsft_with_lambda_zero_is_single_order(setup, pointwise, tmp_path):
    root, _ = setup
    common = {"learning_rate": 3e-3, "max_steps": 3, "batch_size": 4, "grad_accum": 1, "save_steps": 100,
              "logging_steps": 1, "consistency": 0.0}
    train(str(root / "base"), pointwise, TrainSpec.create(method="ocsft", **common), tmp_path / "w1", tmp_path / "ocsft")
    train(str(root / "base"), pointwise, TrainSpec.create(method="single_order", **common), tmp_path / "w2", tmp_path / "single")
    a, b = _weights(tmp_path / "ocsft"), _weights(tmp_path / "single")
    base = _weights(root / "base")
    assert any(not torch.equal(a[k], base[k]) for k in a)  # it trained
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4)


def test_the_ema_teacher_at_decay_zero_trains_exactly_as_ocsft(setup, pointwise, tmp_path):
    """At α = 0 the EMA teacher is the student of the step, and the variance penalty's gradient through its own
    mean is zero (Σ_i (s_i − s̄) = 0), so ocsft_ema's weights equal OC-SFT's; at α = 0.9 they differ, and every
    checkpoint carries the teacher (ema.pt)."""
    root, _ = setup
    common = {"learning_rate": 3e-3, "max_steps": 3, "batch_size": 4, "grad_accum": 1, "save_steps": 100,
              "logging_steps": 1, "views": 2, "consistency": 5.0, "consistency_warmup": 0}
    train(str(root / "base"), pointwise, TrainSpec.create(method="ocsft", **common), tmp_path / "w1", tmp_path / "oc")
    train(str(root / "base"), pointwise, TrainSpec.create(method="ocsft_ema", ema_decay=0.0, **common), tmp_path / "w2",
          tmp_path / "ema0")
    curve = train(str(root / "base"), pointwise,
                  TrainSpec.create(method="ocsft_ema", ema_decay=0.9, **{**common, "save_steps": 2}),
                  tmp_path / "w3", tmp_path / "ema9")
    oc, ema0, ema9 = _weights(tmp_path / "oc"), _weights(tmp_path / "ema0"), _weights(tmp_path / "ema9")
    for k in oc:
        torch.testing.assert_close(oc[k], ema0[k], atol=1e-5, rtol=1e-4)
    assert any(not torch.allclose(oc[k], ema9[k], atol=1e-5) for k in oc)
    assert (tmp_path / "w3" / "checkpoint-2" / "ema.pt").is_file() and (curve["consistency_loss"] > 0).all()


def test_the_ema_teacher_averages_swaps_and_resumes_its_weights(tmp_path):
    """θ' ← α θ' + (1 − α) θ after each step; the teacher's forward sees θ' and leaves θ in place; a run
    resumed at step k starts from the teacher saved with checkpoint k."""
    from types import SimpleNamespace

    from posbias.training.ema import EmaTeacher

    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 2.0]]))
    args, state = SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=0, is_world_process_zero=True)
    teacher = EmaTeacher(0.5)
    teacher.on_train_begin(args, state, None, model=model)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 4.0]]))
    teacher.on_step_end(args, state, None, model=model)
    assert teacher.shadow["weight"].tolist() == [[2.0, 3.0]]
    assert teacher.scores(model, lambda m: m(torch.tensor([[1.0, 1.0]]))).item() == 5.0
    assert model.weight.tolist() == [[3.0, 4.0]] and model.weight.requires_grad
    state.global_step = 1
    (tmp_path / "checkpoint-1").mkdir()
    teacher.on_save(args, state, None)
    resumed = EmaTeacher(0.5)
    resumed.on_train_begin(args, state, None, model=model)
    assert resumed.shadow["weight"].tolist() == [[2.0, 3.0]]
    with pytest.raises(ValueError, match="ema_decay"):
        EmaTeacher(1.0)


def test_view_orders_per_method():
    """OC-SFT's views: the stored anchor window first (identity), then seeded permutations (query,
    window) of it, the same in every epoch unless resampled; single order trains on the anchor alone;
    perm_aug draws anew each epoch."""
    from posbias.methods import TRAINING_METHODS
    from posbias.training.pointwise import view_orders

    identity = list(range(20))
    views = view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q", 0, 0)
    assert len(views) == 3 and all(sorted(v) == identity for v in views) and len({tuple(v) for v in views}) == 3
    assert views[0] == identity  # the anchor: the presentation the teacher labelled
    assert views == view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q", 0, 1)  # the same views in every epoch
    assert views != view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q", 1, 0)  # another window, other views
    assert views != view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q2", 0, 0)  # another query, other views
    resampled = view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q", 0, 1, resample=True)
    assert resampled[0] == identity and resampled != views
    assert resampled == view_orders(TRAINING_METHODS["ocsft"], 20, 3, 0, "q", 0, 1, resample=True)
    assert view_orders(TRAINING_METHODS["single_order"], 20, 3, 0, "q", 0, 0) == views[:1]  # OC-SFT's anchor
    assert view_orders(TRAINING_METHODS["debiasfirst_pointwise"], 20, 3, 0, "q", 0, 0) == views[:1]
    perm = view_orders(TRAINING_METHODS["perm_aug"], 20, 2, 0, "q", 0, 0)
    assert len(perm) == 1 and perm[0] != identity and perm != view_orders(TRAINING_METHODS["perm_aug"], 20, 2, 0, "q", 0, 1)


def test_view_markers_per_method():
    """The marker channel: fixed methods label every view [1] … [B]; marker-diverse SFT relabels each view by a
    seeded permutation drawn anew every epoch; the marker penalty adds a view in the anchor's order whose
    markers alone are relabelled, the same in every epoch."""
    from posbias.methods import TRAINING_METHODS
    from posbias.training.pointwise import view_markers, view_orders

    assert view_markers(TRAINING_METHODS["ocsft"], 20, 2, 0, "q", 0, 0) == [None, None]
    drawn = view_markers(TRAINING_METHODS["marker_sft"], 20, 1, 0, "q", 0, 0)
    assert len(drawn) == 1 and sorted(drawn[0]) == list(range(1, 21)) and drawn[0] != tuple(range(1, 21))
    assert drawn != view_markers(TRAINING_METHODS["marker_sft"], 20, 1, 0, "q", 0, 1)  # anew each epoch
    assert drawn == view_markers(TRAINING_METHODS["marker_sft"], 20, 1, 0, "q", 0, 0)  # seeded
    orders = view_orders(TRAINING_METHODS["ocsft_markers"], 20, 2, 0, "q", 0, 0)
    assert orders == view_orders(TRAINING_METHODS["ocsft"], 20, 2, 0, "q", 0, 0) + [list(range(20))]  # OC-SFT's + the anchor
    penalised = view_markers(TRAINING_METHODS["ocsft_markers"], 20, len(orders), 0, "q", 0, 0)
    assert penalised[:2] == [None, None] and sorted(penalised[2]) == list(range(1, 21))
    assert penalised[2] != tuple(range(1, 21)) and penalised == view_markers(TRAINING_METHODS["ocsft_markers"], 20, 3, 0, "q", 0, 5)


def test_a_label_budget_keeps_the_first_queries_by_id_and_nests():
    """training.<name>.max_queries: every window of the first N query ids, so a smaller budget is a subset."""
    from posbias.training import first_queries

    instances = pl.DataFrame({"query_id": ["q3", "q1", "q2", "q1", "q10"], "window": [0, 0, 0, 1, 0]})
    assert first_queries(instances, 2)["query_id"].to_list() == ["q1", "q1", "q10"]
    assert set(first_queries(instances, 1)["query_id"]) < set(first_queries(instances, 3)["query_id"])
    assert first_queries(instances, 99).height == 5


def test_the_anchor_view_is_a_seeded_permutation_of_each_window():
    """Silver view 0 presents each first-stage window in its anchor order (seeded by seed, query and
    window), and the trainer's instances keep that order, so the teacher labelled what is supervised."""
    from posbias.rerank import Candidates
    from posbias.silver import anchor_order, anchored

    docs = [f"d{i}" for i in range(25)]
    shown = anchored(Candidates("q", "text", docs, {}), 10, 7).doc_ids
    assert [sorted(shown[a:b]) for a, b in ((0, 10), (10, 20), (20, 25))] == [sorted(docs[a:b]) for a, b in
                                                                                ((0, 10), (10, 20), (20, 25))]
    assert shown[:10] == [docs[i] for i in anchor_order(10, 7, "q", 0)] and shown[:10] != docs[:10]
    assert anchor_order(10, 7, "q", 1) != anchor_order(10, 7, "q", 0) != anchor_order(10, 8, "q", 0)


def test_lm_tokens_cut_the_answer_and_identifier_softmax_needs_one_token(setup):
    root, listwise = setup
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(root / "base")
    full = encode_instances(tokenizer, listwise.head(1), 300, 2048)[0]
    first = encode_instances(tokenizer, listwise.head(1), 300, 2048, lm_tokens=1)[0]
    assert first["input_ids"] == full["input_ids"][: first["rank_position"] + 2]
    labelled = [t for t in first["labels"] if t != -100]
    rec = listwise.row(0, named=True)
    assert tokenizer.decode(labelled) == "[" + target_text(rec["doc_ids"], rec["teacher_ranking"])[0]
    with pytest.raises(ValueError, match="set lm_tokens: 1"):
        TrainSpec.create(method="first", lm_softmax="identifiers")
    batch = ListwiseCollator(tokenizer.pad_token_id)([first])
    logits = torch.randn(1, len(first["input_ids"]), len(tokenizer))
    ids = identifier_token_ids(tokenizer)
    _, parts = objective(logits, batch, ids, TrainSpec.create(method="first", lm_tokens=1, lm_softmax="identifiers"), None)
    best = first["gold_rank"].index(0)
    scores = logits[0, first["rank_position"], ids]
    assert parts["lm_loss"] == pytest.approx(float(torch.logsumexp(scores, 0) - scores[best]), rel=1e-5)


@pytest.mark.parametrize("kind", ["bpe", "metaspace"])
def test_the_lm_target_is_tokenised_in_context(tmp_path, kind):
    """The first answer token the LM loss trains is the identifier id First reads after "[", and the
    labelled span decodes to exactly "[" + the ranking, for byte-level and SentencePiece-style tokenizers
    alike (tokenised alone, a Metaspace tokenizer would start the answer with "▁B")."""
    from transformers import AutoTokenizer

    coll = synthetic.generate(SPEC, "train")
    build_tiny_causal_lm(coll.corpus["text"].to_list(), tmp_path / kind, vocab_size=600, hidden=16, layers=1,
                         heads=2, max_length=2048, seed=0, tokenizer=kind)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / kind)
    ids = identifier_token_ids(tokenizer)
    if kind == "metaspace":  # the hazard this test is about is real for this tokenizer: "▁B" or "▁" + "B"
        alone = tokenizer("B] > [A]", add_special_tokens=False)["input_ids"]
        assert alone[0] != ids[1] and tokenizer.convert_ids_to_tokens(alone[0]).startswith("▁")
    for example, rec in zip(encode_instances(tokenizer, coll.listwise.head(3), 300, 2048),
                            coll.listwise.head(3).iter_rows(named=True)):
        first_answer = example["labels"][example["rank_position"] + 1]
        assert first_answer == ids[rec["doc_ids"].index(rec["teacher_ranking"][0])]
        labelled = [t for t in example["labels"] if t != -100]
        assert tokenizer.decode(labelled, skip_special_tokens=True) == "[" + target_text(rec["doc_ids"],
                                                                                         rec["teacher_ranking"])


@pytest.mark.parametrize("family", ["listwise", "pointwise"])
def test_gradient_accumulation_equals_the_larger_batch(setup, pointwise, tmp_path, family):
    """One optimiser step over batch b x accumulation k is the step over batch b·k x accumulation 1:
    the same parameters (to 1e-5) and the same logged loss. Micro-batches of equal size and equal
    target length, so a per-micro-batch mean averaged over the k micro-batches is the batch mean."""
    root, listwise = setup
    method, data, extra = (("debiasfirst", listwise, {"lm_tokens": 1}) if family == "listwise"
                           else ("ocsft", pointwise, {"views": 2, "consistency": 5.0, "consistency_warmup": 0}))
    omega = np.linspace(1, 2, 400).reshape(20, 20) / 600 if family == "listwise" else None
    common = {"method": method, "learning_rate": 1e-3, "max_steps": 1, "save_steps": 100, "logging_steps": 1,
              "max_grad_norm": 1e9, "warmup_ratio": 0, **extra}
    curves = {}
    for b, k in ((2, 4), (8, 1)):
        spec = TrainSpec.create(batch_size=b, grad_accum=k, **common)
        curves[b, k] = train(str(root / "base"), data, spec, tmp_path / f"w{b}x{k}", tmp_path / f"m{b}x{k}", omega)
    small, large = _weights(tmp_path / "m2x4"), _weights(tmp_path / "m8x1")
    base = _weights(root / "base")
    assert any(not torch.equal(small[n], base[n]) for n in small)  # it trained
    for n in small:
        torch.testing.assert_close(small[n], large[n], atol=1e-5, rtol=0)
    # Adam's first step barely sees a constant gradient scale, so the gradient's own norm is checked too
    for column in ("loss", "grad_norm"):
        assert curves[2, 4][column][0] == pytest.approx(curves[8, 1][column][0], rel=1e-5)
