"""OC-SFT's consumers: flip rates, QA decisions through a reader, response ranking, the gold answers,
the config's consumer keys and the consumers table (known answers)."""

import json
import math

import numpy as np
import polars as pl
import pytest

from posbias import config, consumers, metrics, paper, readers
from posbias.data import answers
from posbias.errors import PosbiasError
from posbias.models import build_tiny_causal_lm


def test_registry_matches_the_schema():
    node = config.schema_node("datasets")["additionalProperties"]["properties"]["consumer"]
    assert node["enum"] == list(consumers.CONSUMERS) and node["default"] == consumers.PASSAGE_RERANKING
    assert set(config.defaults("consumers")) == set(consumers.with_decisions())
    assert config.defaults("consumers")["multidoc_qa"]["window"] == 10  # the paper's B
    assert config.defaults("consumers")["response_ranking"]["window"] == 4
    with pytest.raises(ValueError, match="use one of passage_reranking"):
        consumers.get("summaries")


def test_flip_rates_by_hand():
    """Modal flip rates: 1 − the share of presentations giving the most frequent decision."""
    assert metrics.modal_flip(["a", "a", "b"]) == pytest.approx(1 / 3)  # 2 of 3 say "a"
    assert metrics.modal_flip(["a", "b", "c", "a", "b", "a"]) == pytest.approx(1 / 2)  # 3 of 6 say "a"
    assert metrics.modal_flip([True, True]) == 0.0 and metrics.modal_flip(["a"]) == 0.0
    with pytest.raises(ValueError, match="at least one presentation"):
        metrics.modal_flip([])
    # 3 presentations x 4 responses; (chosen, rejected) = (0, 3), (0, 3), (1, 3); top pick 0, 0, 1
    scores = [[0.9, 0.5, 0.3, 0.1], [0.8, 0.7, 0.2, 0.0], [0.4, 0.9, 0.3, 0.1]]
    assert metrics.pair_flip(scores) == pytest.approx(1 / 3)
    assert metrics.selection_flip(scores) == pytest.approx(1 / 3)
    # the same chosen response with another rejected one is another pair; the selection is unchanged
    scores = [[0.9, 0.5, 0.3, 0.1], [0.9, 0.1, 0.3, 0.5], [0.9, 0.3, 0.1, 0.5], [0.9, 0.5, 0.3, 0.1]]
    assert metrics.pair_flip(scores) == pytest.approx(1 / 2) and metrics.selection_flip(scores) == 0.0
    # ties go to the lower column index on both ends: [1, 1, 0] -> (0, 2); [0, 0, 0] -> (0, 0)
    assert metrics.pair_flip([[1, 1, 0], [1, 0, 1], [0, 0, 0]]) == pytest.approx(2 / 3)
    assert metrics.selection_flip([[1, 1, 0], [1, 0, 1], [0, 0, 0]]) == 0.0
    # a random scorer's pair flip approaches 1 − P(the modal pair), far above the old pairwise ≈ 0.5
    rng = np.random.default_rng(0)
    assert metrics.pair_flip(rng.random((10, 4))) >= 0.7
    with pytest.raises(ValueError, match="M x n array"):
        metrics.pair_flip([0.1, 0.2])
    assert consumers.retained({"a": 0.5, "b": 0.9, "c": 0.5, "d": 0.1}, 0.5) == ["b", "a", "c"]


GRADES = {"q1": {"r1": 2, "r2": 1, "n1": 0, "n2": 0, "n3": 0}}
TEXTS = {"r1": "paris", "r2": "paris france", "n1": "lyon", "n2": "nice", "n3": "lille"}


def test_simulated_reader_known_answers():
    reader = readers.SimulatedReader(GRADES, {"q1": ["Paris"]}, relevant_grade=1, min_precision=0.5)
    q = [consumers.Question("q1", "capital?", [(d, TEXTS[d]) for d in docs])
         for docs in (["r1", "n1"], ["n1", "n2", "r2"], ["n2", "n1"], [])]
    # 1 of 2 relevant: right; 1 of 3: copies its best passage (r2); no relevant: the first of equals; none: ""
    assert reader.answer(q) == ["Paris", "paris france", "nice", ""]
    assert consumers.exact_match("The Paris.", ["paris"]) and not consumers.exact_match("paris france", ["paris"])
    assert consumers.normalize_answer("  An  Apple, the pie! ") == "apple pie"


def test_qa_decisions_flip_when_the_retained_set_changes():
    reader = readers.SimulatedReader(GRADES, {"q1": ["Paris"]}, relevant_grade=1, min_precision=0.5)
    canonical = {"q1": {"r1": 0.9, "r2": 0.8, "n1": 0.2, "n2": 0.1, "n3": 0.0}}
    shown = [{"q1": {"r1": 0.9, "r2": 0.8, "n1": 0.2, "n2": 0.1, "n3": 0.0}},  # keeps r1, r2: right
             {"q1": {"r1": 0.9, "r2": 0.3, "n1": 0.2, "n2": 0.1, "n3": 0.0}},  # keeps r1: right
             {"q1": {"r1": 0.2, "r2": 0.3, "n1": 0.9, "n2": 0.8, "n3": 0.7}}]  # keeps n1, n2, n3: wrong
    rows, details = consumers.qa_decisions(canonical, shown, 0.5, reader, {"q1": "capital?"}, TEXTS, {"q1": ["Paris"]})
    assert [d["decision"] for d in details] == ["Paris", "Paris", "lyon"]  # n1 is first in canonical order
    assert [d["correct"] for d in details] == [True, True, False]
    (row,) = rows
    # answers Paris, Paris, lyon: the modal answer is given 2 of 3 times -> flip 1/3 (the verdict too)
    assert row["quality"] == pytest.approx(2 / 3) and row["flip"] == pytest.approx(1 / 3)
    assert row["verdict_flip"] == pytest.approx(1 / 3) and row["retained"] == pytest.approx(2.0)


def _run(scores):
    return pl.DataFrame([(q, d, s) for q, docs in scores.items() for d, s in docs.items()],
                        schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64}, orient="row")


def test_response_ranking_decisions_from_runs():
    qrels = pl.DataFrame({"query_id": ["p"] * 4, "doc_id": ["a", "b", "c", "d"], "relevance": [2, 1, 0, 0]})
    canonical = _run({"p": {"a": 4, "b": 3, "c": 2, "d": 1}})
    shuffled = [_run({"p": {"a": 4, "b": 3, "c": 2, "d": 1}}), _run({"p": {"a": 3, "b": 4, "c": 2, "d": 1}})]
    table, details = consumers.decide(consumers.RESPONSE_RANKING, canonical, shuffled, qrels, 1, 10, 41,
                                      {"model": "m", "dataset": "rr", "retriever": "listed"})
    row = table.row(0, named=True)
    # (chosen, rejected) = (a, d) then (b, d): 1 of 2 off the mode; the top pick flips the same way
    assert row["flip"] == pytest.approx(1 / 2) and row["verdict_flip"] == pytest.approx(1 / 2)
    assert row["quality"] == pytest.approx((1 + 1 / 2) / 2)  # nDCG@1: a (gain 2) then b (gain 1 of 2)
    assert details["decision"].to_list() == ["a", "b"] and row["consumer"] == "response_ranking"
    with pytest.raises(ValueError, match="at least two"):
        consumers.decide(consumers.RESPONSE_RANKING, canonical, shuffled[:1], qrels, 1, 10, 41, {})
    with pytest.raises(ValueError, match="no decisions beyond its ranking"):
        consumers.decide(consumers.PASSAGE_RERANKING, canonical, shuffled, qrels, 1, 10, 41, {})


def test_qa_threshold_is_retention_jaccards_f1_choice():
    """decide() keeps what scores at least τ*, the threshold with the best canonical set-F1."""
    qrels = pl.DataFrame({"query_id": ["q1"] * 5, "doc_id": list(GRADES["q1"]), "relevance": list(GRADES["q1"].values())})
    canonical = _run({"q1": {"r1": 0.9, "r2": 0.8, "n1": 0.2, "n2": 0.1, "n3": 0.0}})
    reader = readers.SimulatedReader(GRADES, {"q1": ["Paris"]}, relevant_grade=1, min_precision=0.5)
    table, details = consumers.decide(consumers.MULTIDOC_QA, canonical, [canonical, canonical], qrels, 1, 10, 41,
                                      {"model": "m", "dataset": "qa", "retriever": "r"}, reader=reader,
                                      questions={"q1": "capital?"}, texts=TEXTS, golds={"q1": ["Paris"]})
    assert table["retained"].to_list() == [2.0] and table["flip"].to_list() == [0.0]
    assert details["correct"].to_list() == [True, True]


@pytest.mark.parametrize("tokenizer", ["bpe", "metaspace"])
def test_lm_reader_answers_from_a_tiny_model(tmp_path, tokenizer):
    """The causal-LM reader runs end to end on a tiny local Llama (byte-level and SentencePiece-style
    tokenizers): one answer per question, deterministic, the same alone and batched."""
    words = "paris lyon nice lille capital city of france question answer passage".split()
    texts = [" ".join(np.random.default_rng(i).choice(words, 30)) for i in range(100)]
    build_tiny_causal_lm(texts, tmp_path / "m", vocab_size=300, hidden=32, layers=1, heads=2, max_length=512,
                         seed=0, tokenizer=tokenizer)
    spec = {**config.entry_defaults("readers", "kind", "causal_lm"), "kind": "causal_lm", "max_new_tokens": 4}
    reader = readers.build(spec, str(tmp_path / "m"), {}, {}, 1, "cpu", 50)
    questions = [consumers.Question(f"q{i}", "capital of france", [("d", texts[i]), ("e", texts[i + 1])])
                 for i in range(3)]
    batched = reader.answer(questions)
    assert len(batched) == 3 and all(isinstance(a, str) for a in batched)
    assert reader.answer(questions[:1]) == batched[:1] and reader.answer(questions) == batched
    prompt = reader.prompt(questions[0])
    assert "Passage 1:" in prompt and "Passage 2:" in prompt and prompt.rstrip().endswith("Answer:")


def test_gold_answers_from_a_file_and_for_the_toy(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"query_id": 1, "answers": ["Paris", "paris"]}) + "\n")
    assert answers.from_file(str(path), "datasets.x.answers").to_dicts() == [{"query_id": "1", "answers": ["Paris", "paris"]}]
    path.write_text(json.dumps({"query_id": 1, "answers": "Paris"}) + "\n")
    with pytest.raises(PosbiasError, match=r"answers.jsonl:1: expected .*datasets.x.answers"):
        answers.from_file(str(path), "datasets.x.answers")
    corpus = pl.DataFrame({"doc_id": ["a", "b", "c"], "title": ["", "", ""], "text": ["x", "y", "z"]})
    qrels = pl.DataFrame({"query_id": ["q", "q", "q"], "doc_id": ["a", "b", "c"], "relevance": [1, 2, 2]})
    assert answers.best_passages(corpus, qrels).to_dicts() == [{"query_id": "q", "answers": ["y"]}]
    with pytest.raises(PosbiasError, match="without gold answers"):
        answers.load("x", {"source": "trec"}, corpus, qrels)
    # a judged query the file has no line for would count as a wrong answer: refused (silent on 0.17.0)
    path.write_text(json.dumps({"query_id": "q", "answers": ["y"]}) + "\n")
    two = pl.concat([qrels, pl.DataFrame({"query_id": ["r"], "doc_id": ["a"], "relevance": [1]})])
    assert answers.load("x", {"source": "trec", "answers": str(path)}, corpus, qrels).height == 1
    with pytest.raises(PosbiasError, match=r"answers.jsonl: no answers for 1 of the dataset's judged queries \(e.g. 'r'\) "
                                           r"\(datasets.x.answers\)"):
        answers.load("x", {"source": "trec", "answers": str(path)}, corpus, two)


def _qa_config(**dataset):
    cfg = {"datasets": {"qa": {"source": "toy", "consumer": "multidoc_qa", "retrievers": ["o"], **dataset},
                        "rr": {"source": "toy", "consumer": "response_ranking", "n_candidates": 4,
                               "retrievers": ["o"]}},
           "retrievers": {"o": {"kind": "oracle"}},
           "models": {"g": {"kind": "simulated", "mode": "grades"}},
           "readers": {"sim": {"kind": "simulated"}},
           "consumers": {"multidoc_qa": {"reader": "sim"}},
           "reranking": {"experiments": [{"model": "g", "dataset": "qa", "retriever": "o"},
                                         {"model": "g", "dataset": "rr", "retriever": "o"}]}}
    config.validate(cfg)
    return cfg


def test_consumer_windows_and_targets_in_the_config():
    cfg = _qa_config()
    config.prepare(cfg)
    assert config.decision_targets(cfg) == [("g", "qa", "o"), ("g", "rr", "o")]
    assert config.rerank_settings(cfg, "g", "qa", "o", "none", "orders")["grade_window"] == 10
    assert config.rerank_settings(cfg, "g", "rr", "o", "none", "orders")["grade_window"] == 4
    assert config.silver_window(cfg, "rr") == 4 and config.consumer_window(cfg, "qa") == 10
    cfg["datasets"]["plain"] = {"source": "toy"}
    assert config.silver_window(cfg, "plain") == cfg["ocsft"]["window"]  # passage reranking: ocsft.window
    # other consumers are measured over shuffles: no position orders
    assert not [o for o in config.orders_of(cfg, {"dataset": "rr"}) if o.startswith("position-")]
    assert len([o for o in config.orders_of(cfg, {"dataset": "plain"}) if o.startswith("position-")]) == 20
    cfg["ocsft"]["retriever"] = {"qa": "o", "rr": "listed"}  # training sets with different first stages
    assert config.silver_retriever(cfg, "rr") == "listed"
    with pytest.raises(ValueError, match="ocsft.retriever names no retriever for dataset 'plain'"):
        config.silver_retriever(cfg, "plain")


def test_a_qa_experiment_without_reader_or_answers_is_one_line():
    cfg = _qa_config()
    cfg["consumers"]["multidoc_qa"]["reader"] = None
    with pytest.raises(ValueError, match="consumers.multidoc_qa.reader None is not a readers entry"):
        config.prepare(cfg)
    cfg = _qa_config()
    cfg["datasets"]["qa"] = {"source": "synthetic", "consumer": "multidoc_qa", "retrievers": ["o"]}
    config.validate(cfg)
    with pytest.raises(ValueError, match="datasets.qa is a multidoc_qa dataset without gold answers"):
        config.prepare(cfg)


def test_consumers_table_marks_differences_from_each_datasets_ocsft():
    rng = np.random.default_rng(0)
    rows = []
    for model, variant, flip in (("oc-s1", "oc", 0.0), ("oc-s2", "oc", 0.0), ("so-s1", "so", 0.5), ("so-s2", "so", 0.5)):
        rows += [{"model": model, "dataset": "qa", "retriever": "r", "consumer": "multidoc_qa", "query_id": f"q{i}",
                  "presentations": 8, "quality": 1.0 - flip, "flip": flip + 0.01 * rng.random(),
                  "verdict_flip": flip, "retained": 2.0} for i in range(30)]
    table = paper.decisions_table(pl.DataFrame(rows), {"oc-s1": "oc", "oc-s2": "oc", "so-s1": "so", "so-s2": "so"},
                                  ["other", "oc"])
    data = {r["variant"]: r for r in table.data.iter_rows(named=True)}
    assert data["oc"]["seeds"] == 2 and data["so"]["flip"] == pytest.approx(0.5, abs=0.01)
    assert data["so"]["p_holm_flip"] < 0.05 and data["oc"]["p_holm_flip"] is None  # the reference is not tested
    view = {r["variant"]: r for r in table.view.iter_rows(named=True)}
    assert view["oc (reference)"]["flip"].startswith("answer flip: 0.00") and view["so"]["flip"].endswith("†")


def test_pool_targets_and_stability_needs_two_shuffles():
    cfg = _qa_config()
    cfg["datasets"]["plain"] = {"source": "toy", "retrievers": ["o"]}
    cfg["reranking"]["experiments"] += [{"model": "g", "dataset": "plain", "retriever": "o", "orders": ["original"]}]
    cfg["ocsft"] = {"pool": {"datasets": ["plain"]}}
    config.validate(cfg)
    config.prepare(cfg)
    assert config.pool_targets(cfg) == [("g", "plain", "o")]
    assert ("g", "plain", "o", "none") not in config.stability_targets(cfg)  # one presentation: no stability
    cfg["ocsft"]["pool"]["datasets"] = ["qa"]
    with pytest.raises(ValueError, match="ocsft.pool.datasets names 'qa', which is not a passage-reranking"):
        config.check_consumers(cfg)
