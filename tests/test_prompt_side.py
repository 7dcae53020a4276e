"""OC-SFT's prompt-side alternatives: slot rotation (``roundrobin@R``), round-robin windowing
(``roundrobin-windows``) and marker renaming (``rename@K``), and the shift of a debiasing method from the
plain scorer (``plain_shift``)."""

import numpy as np
import polars as pl
import pytest

from posbias import config, debias, stability
from posbias.models import build_tiny_causal_lm
from posbias.permute import fisher_yates
from posbias.rerankers import Window
from posbias.debias.wrappers import MarkerRenamed, RoundRobin
from posbias.scoring import GradesScorer
from posbias.rerankers.lm import LMSpec
from posbias.rerankers.simulated import SimulatedGrader, SimulatedReranker
from posbias.scoring import GradesEncoder, grade_tokens

DOCS = [f"d{i}" for i in range(20)]
GRADES = {"q": {d: i % 4 for i, d in enumerate(DOCS)}}


def _wrap(base, name):
    return debias.wrap(base, name, 3, debias.options(config.defaults("reranking"), name))


def _scores(reranker, docs):
    result = reranker.rank([Window("q", "query", docs, docs)])[0]
    return dict(zip(docs, result.scores))


def test_round_robin_windowing_deals_the_list_into_windows():
    """"round-robin 分窗": passage i of the presentation is in window i mod W, W = ⌈n / B⌉; n ≤ B is one
    window, as contiguous."""
    from posbias.windows import round_robin

    assert round_robin(10, 4) == ([0, 3, 6, 9, 1, 4, 7, 2, 5, 8], [(0, 4), (4, 7), (7, 10)])
    assert round_robin(5, 20) == ([0, 1, 2, 3, 4], [(0, 5)]) and round_robin(0, 20) == ([], [])


def test_round_robin_windowing_changes_which_passages_share_a_window():
    """A pointwise scorer in ``roundrobin-windows`` scores each of 40 passages once, in windows whose
    companions come from the whole list (window k: positions k, k + 2, …), one pass, no extra calls;
    the slot rotation (``roundrobin@R``) keeps the contiguous windows' companions."""
    from posbias.rerank import Candidates, rerank

    docs = [f"d{i}" for i in range(40)]
    grader = SimulatedGrader({"q": {d: i % 4 for i, d in enumerate(docs)}}, window=20)
    lists = [Candidates("q", "query", docs, {d: d for d in docs})]
    _, contiguous, cost = rerank(grader, lists, window=20)
    run, dealt, rr_cost = rerank(_wrap(grader, "roundrobin-windows"), lists, window=20)
    groups = {w: sorted(g["doc_id"].to_list(), key=lambda d: int(d[1:])) for (w,), g in dealt.group_by("window")}
    assert groups == {0: docs[0::2], 1: docs[1::2]}
    assert {w: g["doc_id"].to_list() for (w,), g in contiguous.group_by("window")} == {0: docs[:20], 1: docs[20:]}
    assert sorted(run["doc_id"]) == sorted(docs) and rr_cost["calls"].to_list() == cost["calls"].to_list()
    with pytest.raises(ValueError, match="round-robin windowing cuts a pointwise scorer's list"):
        _wrap(SimulatedReranker(GRADES), "roundrobin-windows")


def test_round_robin_offsets_spread_over_the_window():
    base = SimulatedGrader(GRADES, window=20)
    window = Window("q", "query", DOCS, DOCS)
    views = RoundRobin(base, 4, 0, "kemeny", True)._views(window)
    assert [v.doc_ids[0] for v in views] == ["d0", "d5", "d10", "d15"]  # offsets ⌊j·20/4⌋
    assert all(v.doc_ids == DOCS[o:] + DOCS[:o] for v, o in zip(views, (0, 5, 10, 15)))
    # R ≥ n: every rotation once, no repeats
    short = Window("q", "query", DOCS[:3], DOCS[:3])
    assert [v.doc_ids for v in RoundRobin(base, 8, 0, "kemeny", True)._views(short)] == [
        ["d0", "d1", "d2"], ["d1", "d2", "d0"], ["d2", "d0", "d1"]]


def test_round_robin_over_every_slot_makes_a_slot_biased_grader_order_free():
    """A grader whose score depends on the passage and its slot: with R = B rotations every passage visits
    every slot once, so its averaged score is the same in any presentation (the plain one is not)."""
    grader = SimulatedGrader(GRADES, window=20, prior="linear", strength=3.0, noise=0.3, seed=1)
    other = fisher_yates(DOCS, 11)
    plain = (_scores(grader, DOCS), _scores(grader, other))
    assert max(abs(plain[0][d] - plain[1][d]) for d in DOCS) > 0.1
    rr = _wrap(grader, "roundrobin@20")
    a, b = _scores(rr, DOCS), _scores(rr, other)
    assert max(abs(a[d] - b[d]) for d in DOCS) < 1e-12
    # fewer rotations only narrow the slot effect: R = 4 visits 4 of the 20 slots
    rr4 = _wrap(grader, "roundrobin@4")
    a4, b4 = _scores(rr4, DOCS), _scores(rr4, other)
    spread = max(abs(a4[d] - b4[d]) for d in DOCS)
    assert 1e-6 < spread < max(abs(plain[0][d] - plain[1][d]) for d in DOCS)
    grader.reset_stats()
    result = rr4.rank([Window("q", "query", DOCS, DOCS)])[0]
    assert result.stats["calls"] == 4  # one model call per rotation


def test_round_robin_aggregates_a_listwise_models_rankings():
    ranker = SimulatedReranker(GRADES, prior="linear", strength=2.0, noise=0.0, seed=0)
    result = _wrap(ranker, "roundrobin@20").rank([Window("q", "query", DOCS, DOCS)])[0]
    assert result.scores is None and sorted(result.order) == list(range(20))
    ranked = [DOCS[i] for i in result.order]
    assert [GRADES["q"][d] for d in ranked[:5]] == [3] * 5  # the slot prior is averaged away


def test_marker_renaming_is_pointwise_only_and_leaves_a_prompt_free_grader_unchanged():
    grader = SimulatedGrader(GRADES, window=20, prior="linear", strength=3.0, noise=0.3, seed=1)
    renamed = _wrap(grader, "rename@3")
    assert _scores(renamed, DOCS) == pytest.approx(_scores(grader, DOCS), abs=1e-12)
    views = MarkerRenamed(grader, 3, 0, "kemeny", True)._views(Window("q", "query", DOCS, DOCS))
    assert all(v.doc_ids == DOCS and sorted(v.markers) == list(range(1, 21)) for v in views)
    assert len({v.markers for v in views}) == 3 and all(v.markers != tuple(range(1, 21)) for v in views)
    with pytest.raises(ValueError, match="relabels the pointwise Grades prompt; SimulatedReranker is listwise"):
        _wrap(SimulatedReranker(GRADES), "rename@1")


@pytest.fixture(scope="module", params=["bpe", "metaspace"])
def tiny(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("markers") / "m"
    words = "alpha beta gamma delta passage query grade relevance document".split()
    texts = [" ".join(np.random.default_rng(i).choice(words, 12)) for i in range(200)]
    build_tiny_causal_lm(texts, path, vocab_size=400, hidden=32, layers=1, heads=2, max_length=2048, seed=0,
                         tokenizer=request.param)
    return path


def test_renamed_markers_label_the_documents_and_the_skeleton_alike(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    encoder = GradesEncoder(tokenizer, 300, 2048)
    passages = ["alpha beta", "gamma delta", "beta beta"]
    assert encoder.encode("query", passages, (1, 2, 3)) == encoder.encode("query", passages)
    ids, slots, _ = encoder.encode("query", passages, (3, 1, 2))
    text = tokenizer.decode(ids)
    for marker, passage in zip((3, 1, 2), passages):
        assert f"[{marker}] {passage}" in text
    grades = grade_tokens(tokenizer)
    for marker, s in zip((3, 1, 2), slots):  # slot i is read on its own marker's line, in slot order
        assert ids[s + 1] == grades.ids[0]
        assert tokenizer.decode(ids[:s + 1]).endswith(f"[{marker}] Grade{grades.tail}")
    with pytest.raises(ValueError, match="not a permutation of 1 … 3"):
        encoder.encode("query", passages, (1, 2, 4))


def test_a_language_model_reads_its_markers(tiny):
    """A Grades scorer sees the markers: a relabelling changes its scores, the identity does not."""
    scorer = GradesScorer(LMSpec(str(tiny), batch_size=4), window=6)
    docs = ["alpha beta", "gamma delta", "beta beta", "delta alpha", "gamma gamma", "alpha alpha"]
    plain = scorer.rank([Window("q", "query", docs, docs)])[0].scores
    same = scorer.rank([Window("q", "query", docs, docs, (1, 2, 3, 4, 5, 6))])[0].scores
    moved = scorer.rank([Window("q", "query", docs, docs, (6, 5, 4, 3, 2, 1))])[0].scores
    assert same == plain  # the same tokens
    assert max(abs(a - b) for a, b in zip(plain, moved)) > 1e-6  # other tokens (a random-initialised model
    # scores near 0.5 everywhere, so the difference is small)


def test_the_skeleton_probe_reads_another_skeleton_at_the_same_digits(tiny):
    """skeleton@relevance: the same documents and markers, the answer lines "[m] relevance: 0" under
    "relevance grades:", read at the same digit tokens; the scores move, a simulated grader's do not; a probe
    without a skeleton's name or of an unknown one is refused in one line."""
    from transformers import AutoTokenizer

    from posbias.debias.wrappers import SkeletonSwapped

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    encoder = GradesEncoder(tokenizer, 300, 2048)
    docs = ["alpha beta", "gamma delta", "beta beta"]
    ids, slots, _ = encoder.encode("query", docs, None, "relevance")
    for marker, s in zip((1, 2, 3), slots):
        assert ids[s + 1] == encoder.grades.ids[0]
        assert tokenizer.decode(ids[:s + 1]).endswith(f"[{marker}] relevance{encoder._tail('relevance')}")
    assert "relevance grades:" in tokenizer.decode(ids) and "Grades:" not in tokenizer.decode(ids)
    with pytest.raises(ValueError, match="answer skeleton 'json'"):
        encoder.encode("query", docs, None, "json")
    scorer = GradesScorer(LMSpec(str(tiny), batch_size=4), window=6)
    window = Window("q", "query", docs, docs)
    plain = scorer.rank([window])[0].scores
    probed = SkeletonSwapped(scorer, "relevance").rank([window])[0].scores
    assert max(abs(a - b) for a, b in zip(plain, probed)) > 1e-6
    grader = SimulatedGrader({"q": {"alpha beta": 1}}, window=3, prior="linear", strength=1.0, noise=0.3, seed=1)
    assert SkeletonSwapped(grader, "relevance").rank([window])[0].scores == grader.rank([window])[0].scores
    assert debias.probe_channel("skeleton@relevance") == "skeleton" and debias.probe_channel("rename@1") == "markers"
    assert debias.probe_channel("rename@4") is None and debias.probe_channel("bsc@1") is None
    for name, message in (("skeleton", "name the answer skeleton to probe, one of skeleton@relevance"),
                          ("skeleton@grades", "name the answer skeleton to probe")):
        with pytest.raises(ValueError, match=message):
            debias.options(config.defaults("reranking"), name)


def _run(scores: dict[str, dict[str, float]]) -> pl.DataFrame:
    return pl.DataFrame([(q, d, s) for q, per in scores.items() for d, s in per.items()],
                        schema=["query_id", "doc_id", "score"], orient="row")


def test_plain_shift_known_answers():
    up = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}, "r": {"a": 1.0, "b": 2.0}}
    down = {"q": {"a": 1.0, "b": 2.0, "c": 3.0}, "r": {"a": 1.0, "b": 2.0}}
    one_swap = {"q": {"a": 3.0, "b": 1.0, "c": 2.0}}
    assert stability.plain_shift([up, up], [up, up]) == {"q": 0.0, "r": 0.0}
    assert stability.plain_shift([up], [down]) == {"q": pytest.approx(1.0), "r": 0.0}
    assert stability.plain_shift([up, one_swap], [up, up])["q"] == pytest.approx((0 + 1 / 3) / 2)
    with pytest.raises(ValueError, match="2 presentations of the method, 1 of the plain scorer"):
        stability.plain_shift([up, up], [up])


def test_the_stability_table_reports_a_methods_shift_only_with_its_plain_runs():
    qrels = pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "relevance": [1]})
    scores = [{"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, {"q": {"a": 3.0, "b": 1.0, "c": 2.0}},
              {"q": {"a": 1.0, "b": 2.0, "c": 3.0}}]
    keys = {"model": "m", "dataset": "d", "retriever": "r", "debias": "rename@1", "family": "pointwise"}
    runs = [_run(s) for s in scores]
    table, per_query = stability.stability_table(runs[0], runs[1:], qrels, 1, [1], keys, {"calls": 1.0, "prompt_tokens": 1.0}, combine=None,
                                                 plain_runs=runs)
    assert table["plain_shift"].to_list() == [0.0] and per_query["plain_shift"].to_list() == [0.0]
    table, _ = stability.stability_table(runs[0], runs[1:], qrels, 1, [1], keys, {"calls": 1.0, "prompt_tokens": 1.0}, combine=None,
                                         plain_runs=[runs[0]] * 3)
    assert table["plain_shift"].to_list() == pytest.approx([(0 + 1 / 3 + 1) / 3])
    table, _ = stability.stability_table(runs[0], runs[1:], qrels, 1, [1], keys, {"calls": 1.0, "prompt_tokens": 1.0}, combine=None)
    assert np.isnan(table["plain_shift"][0])


def _cfg(model_entry: dict, debias: list[str]) -> dict:
    cfg = {"datasets": {"toy": {"source": "toy", "split": "test", "retrievers": ["b"]}},
           "retrievers": {"b": {"kind": "oracle"}},
           "models": {"m": model_entry},
           "reranking": {"experiments": [{"model": "m", "dataset": "toy", "retriever": "b", "debias": debias,
                                          "orders": ["original", "shuffled-0", "shuffled-1"]}]}}
    config.validate(cfg)
    config.prepare(cfg)
    return cfg


def test_prompt_side_alternatives_are_stability_targets_and_misuse_is_refused():
    grader = {"kind": "simulated", "mode": "grades"}
    cfg = _cfg(grader, ["none", "roundrobin@4", "rename@1"])
    assert config.stability_targets(cfg) == [("m", "toy", "b", d) for d in ("none", "roundrobin@4", "rename@1")]
    with pytest.raises(ValueError, match=r"experiments\[0\].debias: bsc@3 does not apply to 'm', a pointwise scorer"):
        _cfg(grader, ["none", "bsc@3"])
    with pytest.raises(ValueError, match=r"rename@1 does not apply to 'm', a listwise scorer.*use one of none, capcal"):
        _cfg({"kind": "simulated"}, ["none", "rename@1"])
