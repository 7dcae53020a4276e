"""The compute plan (posbias.plan): counting rerankers spend exactly what the models spend, the stand-in
tokenizer and the throughput arithmetic have known answers (the README's preset plans: tests/test_workflow.py,
beside the presets' dry runs that share their fixture)."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from transformers import AutoTokenizer

from posbias import config, debias, plan, rerankers
from posbias.models import build_tiny_causal_lm
from posbias.prompts import IDENTIFIERS
from posbias.rerank import Candidates, rerank
from posbias.rerankers.lm import readout
from posbias.scoring import GradesEncoder

REPO = Path(__file__).resolve().parents[1]
RERANKING = config.defaults("reranking")
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def _text(i: int, n: int) -> str:
    return " ".join(np.random.default_rng(i).choice(WORDS, n))


@pytest.fixture(scope="module", params=["bpe", "metaspace"])
def tiny(request, tmp_path_factory) -> Path:
    """A byte-level and a SentencePiece-style (Llama/Mistral-like, with BOS) tiny model."""
    out = tmp_path_factory.mktemp("models") / request.param
    build_tiny_causal_lm([_text(i, 60) for i in range(200)], out, vocab_size=600, hidden=16, layers=1, heads=2,
                         max_length=4096, seed=0, tokenizer=request.param)
    return out


def _lists(n: int, size: int) -> list[Candidates]:
    out = []
    for q in range(n):
        docs = [f"q{q}-d{j}" for j in range(size)]
        out.append(Candidates(f"q{q}", f"query {WORDS[q]} {WORDS[q + 1]}", docs,
                              {d: _text(97 * q + j, 5 + 7 * j % 50) for j, d in enumerate(docs)}))
    return out


def _spec(mode: str, **extra) -> dict:
    return {**config.model_defaults("causal_lm"), "kind": "causal_lm", "mode": mode, **extra}


def _costs(spec: dict, path: Path, method: str, lists, loaded=None) -> pl.DataFrame:
    base = rerankers.build(spec, str(path), {}, 0, "cpu", RERANKING["word_budget"], loaded=loaded)
    reranker = debias.wrap(base, method, 0, debias.options(RERANKING, method))
    _, _, cost = rerank(reranker, lists, base.window or 20, 10, spec["batch_size"])
    return cost.select("query_id", "windows", "calls", "prompt_tokens")


@pytest.mark.parametrize(("mode", "extra", "debias"), [
    ("first", {}, "none"), ("first", {}, "capcal"), ("first", {}, "permsc-window@3"), ("first", {}, "bsc@2"),
    ("first", {"identifiers": "numbers"}, "none"), ("grades", {}, "none"), ("grades", {"grade_window": 7}, "none"),
])
def test_a_counting_reranker_spends_what_the_model_spends(tiny, mode, extra, debias):
    """One window per list (First: 20 passages; Grades: contiguous windows): calls and tokens equal."""
    spec, lists = _spec(mode, **extra), _lists(5, 20)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    real = _costs(spec, tiny, debias, lists)
    counted = _costs(spec, tiny, debias, lists, loaded=(tokenizer, None))
    assert counted.equals(real), (counted, real)
    assert real["prompt_tokens"].min() > 100


def test_generation_is_planned_as_its_decoding_bound(tiny):
    spec, lists = _spec("generation"), _lists(3, 20)
    real = _costs(spec, tiny, "none", lists)
    counted = _costs(spec, tiny, "none", lists, loaded=(AutoTokenizer.from_pretrained(tiny), None))
    assert counted["prompt_tokens"].equals(real["prompt_tokens"])
    assert (counted["calls"] == 5 * 20 + 4).all() and (real["calls"] <= counted["calls"]).all()


def test_sliding_windows_are_counted_exactly_in_calls(tiny):
    """Windows after the first hold what the model promoted: the plan counts their calls exactly and
    their tokens on the input order (close, not equal)."""
    spec, lists = _spec("first"), _lists(3, 45)
    real = _costs(spec, tiny, "none", lists)
    counted = _costs(spec, tiny, "none", lists, loaded=(AutoTokenizer.from_pretrained(tiny), None))
    assert counted["calls"].equals(real["calls"]) and counted["windows"].to_list() == [4, 4, 4]
    assert counted["prompt_tokens"].sum() == pytest.approx(real["prompt_tokens"].sum(), rel=0.2)


def test_capcal_pays_for_its_prior_in_every_order(tiny):
    """The content-free prior is cached within an order and paid again after reset_stats, so an order's
    cost does not depend on which orders share its job."""
    base = rerankers.build(_spec("first"), str(tiny), {}, 0, "cpu", 300)
    reranker = debias.wrap(base, "capcal", 0, debias.options(RERANKING, "capcal"))
    lists = _lists(2, 20)
    first = rerank(reranker, lists, 20, 10, 8)[2].drop("seconds")
    base.reset_stats()
    again = rerank(reranker, lists, 20, 10, 8)[2].drop("seconds")
    assert first.equals(again) and first["calls"].to_list() == [2, 2]  # the window and the prior


def test_rule_of_thumb_tokenizer_known_answers():
    tok = plan.RuleOfThumbTokenizer()
    # BOS, "the" (1), "retrieval" (9 characters: 2), "." (1), "Passage" (7: 2)
    assert len(tok("the retrieval. Passage")["input_ids"]) == 7
    assert len(tok("the retrieval", add_special_tokens=False)["input_ids"]) == 3
    # it serves the prompt code: single-token letters, prefix-free numbers, single-token grades
    assert all(len(p) == 1 for p in readout(tok, "rankzephyr", "letters", len(IDENTIFIERS)).paths)
    assert len(set(readout(tok, "rankzephyr", "numbers", 20).paths)) == 20
    ids, reads, _ = GradesEncoder(tok, 300, 4096).encode("a query", ["one passage", "another one"])
    assert len(reads) == 2 and max(reads) < len(ids)


def test_a_plans_memoised_tokenizer_gives_the_wrapped_tokenizers_ids():
    """The plan's MemoTokenizer: the real tokenizer's ids for a plain call, tokenised once per text and
    special-token setting; a caller's edit of the ids does not reach the memo; other calls and
    attributes are the wrapped tokenizer's."""
    from posbias import standins

    class Spy:
        def __init__(self, tokenizer):
            self.tokenizer, self.calls = tokenizer, 0

        def __call__(self, text, **kwargs):
            self.calls += 1
            return self.tokenizer(text, **kwargs)

        def __getattr__(self, name):
            return getattr(self.tokenizer, name)

    real = standins.tokenizer("qwen3")
    memo = plan.MemoTokenizer(Spy(real))
    text = "<|im_start|>user\n[A] the first passage\n[B] the second<|im_end|>\n<|im_start|>assistant\n["
    expected = real(text, add_special_tokens=True)["input_ids"]
    memo(text)["input_ids"].append(-1)
    assert memo(text, add_special_tokens=True)["input_ids"] == expected and memo.calls == 1
    assert memo(text, add_special_tokens=False)["input_ids"] == real(text, add_special_tokens=False)["input_ids"]
    assert memo.calls == 2
    batch = memo([text, "short"], add_special_tokens=True, padding=True)
    assert len(batch["input_ids"][1]) == len(expected) and memo.calls == 3
    side = real.padding_side
    direct = plan.MemoTokenizer(real)
    direct.padding_side = "left" if side == "right" else "right"  # set on the wrapped tokenizer, as a loader does
    assert real.padding_side != side and direct.chat_template == real.chat_template
    real.padding_side = side


def test_throughput_rows_scale_with_size_and_hours_add_up(tmp_path):
    rows = [plan.Throughput(1.0, 1000.0, 0.01, 0.0, 5.0, "a"), plan.Throughput(8.0, 200.0, 0.02, 0.0, 20.0, "b")]
    assert plan.throughput_for(rows, 1.0) == rows[0]
    half = plan.throughput_for(rows, 2.0)  # nearer to 1B on a log scale: 1000 tokens/s × 1 / 2
    assert half.prefill_tokens_per_s == pytest.approx(500.0) and half.load_s == 5.0 and "scaled" in half.source
    table = tmp_path / "throughput.yaml"
    table.write_text("train_factor: 4\nsimulated: {call_s: 0.001, source: s}\ndevices:\n  dev:\n    rows:\n"
                     "      - {params_b: 2.0, prefill_tokens_per_s: 1000, call_s: 0.5, decode_s: 0, load_s: 10, source: m}\n")
    cfg = {"plan": {"device": "dev", "throughput": str(table)},
           "models": {"lm": {"kind": "causal_lm", "mode": "first", "params_b": 2.0}, "sim": {"kind": "simulated", "mode": "first"}},
           "training": {"lm": {"gpus": 4}}}
    orders = pl.DataFrame(
        [{"family": "rerank", "model": "lm", "job": "a", "windows": 10, "calls": 10, "prompt_tokens": 5000,
          "calls_exact": True, "tokens_exact": True},
         {"family": "rerank", "model": "lm", "job": "b", "windows": 10, "calls": 10, "prompt_tokens": 5000,
          "calls_exact": True, "tokens_exact": False},
         {"family": "rerank", "model": "sim", "job": "a", "windows": 1000, "calls": 1000, "prompt_tokens": 0,
          "calls_exact": True, "tokens_exact": True},
         {"family": "train", "model": "lm", "job": "lm", "windows": 100, "calls": 100, "prompt_tokens": 9000,
          "calls_exact": False, "tokens_exact": False}]).with_columns(tokenizer=pl.lit("own"))
    timed = plan.with_seconds(orders, cfg)
    assert timed["model_seconds"].to_list() == pytest.approx([10 * 0.5 + 5.0, 10 * 0.5 + 5.0, 1.0, 36.0])
    summary = {(r["family"], r["model"]): r for r in plan.summary(timed, cfg).to_dicts()}
    assert summary[("rerank", "lm")]["jobs"] == 2 and not summary[("rerank", "lm")]["tokens_exact"]
    assert summary[("rerank", "lm")]["device_hours"] == pytest.approx((2 * 10 + 20) / 3600)
    assert summary[("rerank", "sim")]["device_hours"] == pytest.approx(1.0 / 3600)
    assert summary[("train", "lm")]["device_hours"] == pytest.approx((4 * 10 + 36) / 3600)  # 4 GPUs load it
    with pytest.raises(Exception, match="plan.device 'gpu'"):
        plan.read_throughput(table, "gpu")


def test_each_model_is_priced_at_its_engines_rows(tmp_path):
    """A vLLM model's rerank jobs take the table's vLLM rows; training and the Grades scorer stay on
    transformers; planning as if on vLLM moves only the models vLLM serves; no vLLM row is one line."""
    table = tmp_path / "throughput.yaml"
    table.write_text("train_factor: 1\nsimulated: {call_s: 0.001, source: s}\ndevices:\n  dev:\n    rows:\n"
                     "      - {params_b: 1.0, prefill_tokens_per_s: 100, call_s: 0, decode_s: 0, load_s: 1, source: hf}\n"
                     "      - {engine: vllm, params_b: 1.0, prefill_tokens_per_s: 1000, call_s: 0, decode_s: 0, load_s: 30,"
                     " source: v}\n")
    cfg = {"plan": {"device": "dev", "throughput": str(table)},
           "models": {"first": {"kind": "causal_lm", "mode": "first", "engine": "vllm", "params_b": 1.0},
                      "grades": {"kind": "causal_lm", "mode": "grades", "engine": "transformers", "params_b": 1.0}},
           "training": {"first": {"gpus": 1}}}
    orders = pl.DataFrame([{"family": family, "model": model, "job": "j", "windows": 1, "calls": 1,
                            "prompt_tokens": 1000, "calls_exact": True, "tokens_exact": True}
                           for family, model in (("rerank", "first"), ("train", "first"), ("rerank", "grades"))])
    timed = plan.with_seconds(orders.with_columns(tokenizer=pl.lit("own")), cfg)
    assert timed["model_seconds"].to_list() == pytest.approx([1.0, 10.0, 10.0]) and timed["load_s"].to_list() == [30, 1, 1]
    cfg["models"]["first"]["engine"] = "transformers"
    assert plan.with_seconds(orders, cfg)["model_seconds"].to_list() == pytest.approx([10.0, 10.0, 10.0])
    assert plan.with_seconds(orders, cfg, engine="vllm")["model_seconds"].to_list() == pytest.approx([1.0, 10.0, 10.0])
    table.write_text(table.read_text().split("      - {engine")[0])
    with pytest.raises(Exception, match="the table has no vllm rows"):
        plan.with_seconds(orders, cfg, engine="vllm")


def test_a_model_without_a_size_is_one_clear_line():
    cfg = {"models": {"big": {"kind": "causal_lm", "path": "org/not-on-this-machine"}}}
    with pytest.raises(Exception, match=r"models.big.params_b is needed"):
        plan.model_params_b(cfg, "big", Path("."))


def test_the_serving_plan_prices_fixed_and_adaptive_budgets():
    """K presentations cost K × one presentation's calls and tokens per query (counted on the shuffled
    orders); an adaptive budget is the range from patience + 1 to K draws, never exact."""
    from posbias.plan.serving import serving, serving_table

    rows = [{"family": "rerank", "model": "pw-s1", "dataset": "d", "retriever": "r", "debias": "none", "order": order,
             "job": "j", "queries": 10, "windows": 50, "calls": 50, "prompt_tokens": 1000, "calls_exact": True,
             "tokens_exact": True, "tokenizer": "t"} for order in ("original", "shuffled-0", "shuffled-1")]
    rows.append({**rows[1], "model": "lw", "calls": 10, "prompt_tokens": 3000})
    orders = pl.DataFrame(rows)
    targets = [{"model": "pw-s1", "variant": "pw", "dataset": "d", "retriever": "r", "family": "pointwise"},
               {"model": "lw", "dataset": "d", "retriever": "r", "family": "listwise"},
               {"model": "unplanned", "dataset": "d", "retriever": "r", "family": "listwise"}]
    out = serving(orders, targets, [1, 2, 4], {"caps": [4], "patience": 1, "depth": 10})
    got = {(r["model"], r["method"]): r for r in out.iter_rows(named=True)}
    assert set(got) == {("pw", "bsc@2"), ("pw", "bsc@4"), ("pw", "bsc@≤4 adaptive"),
                        ("lw", "permsc@2"), ("lw", "permsc@4"), ("lw", "permsc@≤4 adaptive")}
    assert (got["pw", "bsc@4"]["calls_min"], got["pw", "bsc@4"]["tokens_max"]) == (20.0, 400.0)
    assert (got["pw", "bsc@≤4 adaptive"]["calls_min"], got["pw", "bsc@≤4 adaptive"]["calls_max"]) == (10.0, 20.0)
    assert got["lw", "permsc@2"]["calls_min"] == 2.0 and got["lw", "permsc@2"]["exact"]
    assert not got["pw", "bsc@≤4 adaptive"]["exact"]
    view = {(r["model"], r["method"]): r for r in serving_table(out).view.iter_rows(named=True)}
    assert view["pw", "bsc@4"]["calls/query"] == "20.0" and view["pw", "bsc@≤4 adaptive"]["calls/query"] == "~10.0–20.0"


def test_the_dry_plan_counts_a_few_orders_of_each_kind_and_gives_the_others_their_mean(tmp_path):
    """On stand-ins every shuffled or position order of an experiment reranks the same passages: counting the
    first two of each kind (over the experiment's rerank jobs, three orders a job) and giving the others their
    kind's mean keeps the rows, their jobs, the calls and (within 0.1%) the prompt tokens of counting all."""
    import yaml

    from posbias import config as pbconfig
    from posbias import dry_plan
    from posbias.plan import plan_orders

    shuffles = [f"shuffled-{i}" for i in range(6)]
    positions = [f"position-{p}" for p in (1, 5, 10, 15, 20)]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({
        "config_version": 2,
        "datasets": {"dl21": {"source": "irds", "id": "msmarco-passage-v2/trec-dl-2021/judged", "retrievers": ["bm25"],
                              "prebuilt": {"bm25": "msmarco-v2-passage"}}},
        "retrievers": {"bm25": {"kind": "bm25", "depth": 40}},
        "models": {"qwen3-4b": {"kind": "causal_lm", "path": "Qwen/Qwen3-4B", "params_b": 4.0, "mode": "grades",
                                "grade_window": 20}},
        "reranking": {"depth": 40, "orders_per_job": 3,
                      "experiments": [{"model": "qwen3-4b", "dataset": "dl21", "retriever": "bm25",
                                       "orders": ["original", *shuffles, *positions]}]}}))
    config = pbconfig.load(path, files=False)
    scale = dry_plan.StandIns(config, yaml.safe_load(dry_plan.STAND_INS.read_text()), tmp_path / "standins")
    exact = plan_orders(config, tmp_path / "standins", scale)
    counted = plan_orders(config, tmp_path / "standins", scale, orders_counted=2)
    assert sorted(counted.select("order", "job").rows()) == sorted(exact.select("order", "job").rows())
    assert counted["job"].n_unique() == 5  # the orders are spread over several jobs
    assert counted["calls"].sum() == exact["calls"].sum()
    assert abs(counted["prompt_tokens"].sum() / exact["prompt_tokens"].sum() - 1) < 1e-3
    by = {r["order"]: r for r in counted.iter_rows(named=True)}
    for kind in (shuffles, positions):
        mean = round((by[kind[0]]["prompt_tokens"] + by[kind[1]]["prompt_tokens"]) / 2)
        assert all(by[o]["prompt_tokens"] == mean and not by[o]["tokens_exact"] for o in kind[2:])
        assert by[kind[0]]["tokens_exact"] == exact.filter(pl.col("order") == kind[0])["tokens_exact"][0]
