"""The batched pointwise Grades scorer: E[g] readout, skeleton positions, batching, reranking by score."""

import math

import numpy as np
import pytest
import torch

from posbias.data import synthetic
from posbias.models import build_tiny_causal_lm
from posbias.rerank import Candidates, rerank
from posbias.rerankers import Window
from posbias.scoring import GradesScorer
from posbias.rerankers.lm import LMSpec
from posbias.scoring import GradesEncoder, expected_grade, grade_scores, grade_tokens


def test_expected_grade_known_answers():
    assert expected_grade([0.0, 0.0, 0.0, 0.0]) == pytest.approx(1.5)
    assert expected_grade([0.0, 0.0, 0.0, 50.0]) == pytest.approx(3.0)
    assert expected_grade([50.0, 0.0, 0.0, 0.0]) == pytest.approx(0.0, abs=1e-12)
    p = np.exp([1.0, 2.0, 0.5, -1.0])
    p /= p.sum()
    assert expected_grade([1.0, 2.0, 0.5, -1.0]) == pytest.approx(float(p @ [0, 1, 2, 3]))
    # adding a constant to all logits changes nothing (renormalised over the four)
    assert expected_grade([11.0, 12.0, 10.5, 9.0]) == pytest.approx(expected_grade([1.0, 2.0, 0.5, -1.0]))
    assert float(grade_scores(torch.tensor([0.0, 0.0, 0.0, 50.0]))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="4 logits"):
        expected_grade([1.0, 2.0])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("grades")
    coll = synthetic.generate(synthetic.SyntheticSpec(n_docs=200, n_test_queries=3, n_train_queries=4,
                                                      doc_length=(10, 20)), "test")
    build_tiny_causal_lm(coll.corpus["text"].to_list(), root / "m", vocab_size=500, hidden=32, layers=2, heads=2,
                         max_length=2048, seed=0)
    return root / "m", coll


def test_skeleton_slots_point_at_the_grade_digit(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny[0])
    encoder = GradesEncoder(tokenizer, 300, 2048)
    ids, slots, _ = encoder.encode("a query", ["first doc", "second doc", "third"])
    assert len(slots) == 3
    grades = grade_tokens(tokenizer)
    for i, s in enumerate(slots, start=1):
        assert ids[s + 1] == grades.ids[0]  # the placeholder grade follows the read position
        assert tokenizer.decode(ids[:s + 1]).endswith(f"[{i}] Grade{grades.tail}")
    assert tokenizer.decode(ids).rstrip().endswith("[3] Grade: 0")
    # the prompt and skeleton are the whole text's own tokens: this byte-level tokenizer splits the
    # prompt's final "\n\n" into two tokens before "Grades:", one alone, so the skeleton replaces it
    from posbias.prompts import grades_message, render

    text = render(tokenizer, "a query", ["first doc", "second doc", "third"], 300, None, message=grades_message).text
    digit = ("" if grades.tail.endswith(" ") else " ") + "0"
    assert tokenizer(text + "Grades:" + "".join(f"\n[{i}] Grade{grades.tail}{digit}" for i in (1, 2, 3)))["input_ids"] == ids
    assert encoder.skeleton((1, 2, 3))[2] == 1


def test_scores_are_batch_invariant_and_any_b_works(tiny):
    path, coll = tiny
    scorer = GradesScorer(LMSpec(str(path), batch_size=4), window=20)
    texts = coll.corpus["text"].to_list()
    windows = [Window("q1", "alpha", ["a", "b", "c"], texts[:3]), Window("q2", "beta", list("defgh"), texts[3:8]),
               Window("q3", "gamma", ["x"] * 4, texts[8:12])]
    together = scorer.rank(windows)
    alone = [scorer.rank([w])[0] for w in windows]
    for a, b in zip(together, alone):
        assert len(a.scores) == len(b.scores)
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
        assert all(0.0 <= s <= 1.0 for s in a.scores)
        assert a.order == sorted(range(len(a.scores)), key=lambda i: (-a.scores[i], i))


def test_content_free_slot_scores_are_the_placeholder_prompts_and_cached_per_query(tiny):
    """The Grades scorer's per-slot priors: the real window's scores as ``rank`` gives them, the same slots'
    scores of the prompt whose passages are all the placeholder, that prompt's call charged once per
    (query, size, markers) and again after ``reset_stats``."""
    path, coll = tiny
    scorer = GradesScorer(LMSpec(str(path), batch_size=4), window=20)
    texts = coll.corpus["text"].to_list()
    windows = [Window("q1", "alpha", ["a", "b", "c"], texts[:3]), Window("q1", "alpha", ["d", "e", "f"], texts[3:6])]
    out = scorer.content_free_inputs(windows, "N/A")
    plain = scorer.rank(windows)
    empty = scorer.rank([Window("", "alpha", [""] * 3, ["N/A"] * 3)])[0]
    for (real, prior, _), result in zip(out, plain):
        np.testing.assert_allclose(real, result.scores, atol=1e-5)
        np.testing.assert_allclose(prior, empty.scores, atol=1e-5)
    assert [c["calls"] for _, _, c in out] == [2, 1] and out[0][2]["prompt_tokens"] > out[1][2]["prompt_tokens"]
    scorer.reset_stats()
    assert scorer.content_free_inputs(windows[:1], "N/A")[0][2]["calls"] == 2


def test_pointwise_rerank_uses_contiguous_windows_and_sorts_by_score():
    from posbias.rerankers.simulated import SimulatedGrader

    grades = {"q": {f"d{i}": (3 if i % 7 == 0 else 0) for i in range(45)}}
    scorer = SimulatedGrader(grades, window=20, noise=0.1, seed=1)
    docs = [f"d{i}" for i in range(45)]
    run, log, cost = rerank(scorer, [Candidates("q", "query", docs, {d: d for d in docs})], window=20, step=10)
    assert log.group_by("window").len().sort("window")["len"].to_list() == [20, 20, 5]
    assert log.filter(log["window"] == 0)["doc_id"].to_list() == docs[:20]  # in the given order
    assert run["score"].is_sorted(descending=True)
    assert set(run["doc_id"].head(7)) == {f"d{i}" for i in range(0, 45, 7)}
    assert int(cost["calls"][0]) == 3
    assert not math.isnan(run["score"][0])
