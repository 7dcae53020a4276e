"""Decision-stability metrics on the simulated grader (known answers) and silver labels."""

import math

import numpy as np
import polars as pl
import pytest

from posbias import orders, silver
from posbias.data import synthetic
from posbias.data.collection import grades_by_query
from posbias.rerank import Candidates, present_candidates, rerank
from posbias.rerankers.simulated import SimulatedGrader
from posbias.stability import stability_table

SPEC = synthetic.SyntheticSpec(n_docs=400, n_test_queries=12, n_train_queries=6, n_candidates=40, doc_length=(5, 10))


@pytest.fixture(scope="module")
def coll():
    """The synthetic test split and a first-stage run: each query's judged documents plus random others, 40 in all."""
    c = synthetic.generate(SPEC, "test")
    rng = np.random.default_rng(0)
    all_docs = c.corpus["doc_id"].to_list()
    judged = grades_by_query(c.qrels)
    rows = []
    for qid in c.queries["query_id"].to_list():
        docs = list(judged.get(qid, {}))[:20]
        docs += [d for d in rng.permutation(all_docs).tolist() if d not in docs][: 40 - len(docs)]
        docs = rng.permutation(docs).tolist()
        rows += [(qid, d, r + 1, float(40 - r)) for r, d in enumerate(docs)]
    first = pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "rank": pl.Int32,
                                       "score": pl.Float64}, orient="row")
    return c, first


KEYS = {"model": "m", "dataset": "d", "retriever": "r", "debias": "none", "family": "pointwise"}
COST = {"calls": 4.0, "prompt_tokens": 400.0}  # one presentation's mean per query
ONE_CALL = {"calls": 1.0, "prompt_tokens": 100.0}


def scored_runs(coll, scorer, shuffles):
    c, first = coll
    grades = grades_by_query(c.qrels)
    runs = []
    for name in ["original"] + [f"shuffled-{s}" for s in range(shuffles)]:
        shown = present_candidates(first, c.queries, c.corpus, grades, orders.parse(name), 7, 40, 1, 20)
        runs.append(rerank(scorer, shown.lists, window=10)[0])
    return runs, c.qrels


def table(coll, order_noise, shuffles=20, ks=(1, 10)):
    c, _ = coll
    scorer = SimulatedGrader(grades_by_query(c.qrels), window=10, noise=0.3, order_noise=order_noise, seed=3)
    runs, qrels = scored_runs(coll, scorer, shuffles)
    return stability_table(runs[0], runs[1:], qrels, 1, list(ks), KEYS, COST,
                           presentations=None)[0]


def test_per_query_rows_average_to_the_table(coll):
    c, _ = coll
    scorer = SimulatedGrader(grades_by_query(c.qrels), window=10, noise=0.3, order_noise=1.0, seed=3)
    runs, qrels = scored_runs(coll, scorer, 4)
    summary, per_query = stability_table(runs[0], runs[1:], qrels, 1, [1, 2], KEYS, COST)
    for k in (1, 2):
        row, queries = summary.filter(pl.col("k") == k).row(0, named=True), per_query.filter(pl.col("k") == k)
        assert queries.height == row["queries"]
        for column in ("ndcg10", "tau_psi", "jaccard", "tie_rate", "dispersion", "top10_instability"):
            assert queries[column].mean() == pytest.approx(row[column]), column
    plain = summary.filter(pl.col("k") == 1).row(0, named=True)
    assert plain["tie_rate"] < 0.01 and plain["dispersion"] > 0.05 and 0 < plain["top10_instability"] < 1


def test_order_invariant_scorer_is_perfectly_stable(coll):
    t = table(coll, 0.0, shuffles=4, ks=(1, 2))
    row = t.filter(pl.col("k") == 1).row(0, named=True)
    assert row["tau_psi"] == pytest.approx(0.0, abs=1e-12)
    assert row["jaccard"] == 1.0 and row["top10_instability"] == 0.0
    assert row["ndcg10"] == pytest.approx(row["ndcg10_canonical"])
    assert t.filter(pl.col("k") == 2)["calls_per_query"][0] == 8.0


def test_order_noise_breaks_stability_and_bsc_restores_it(coll):
    t = table(coll, 1.5)
    plain, bsc = (t.filter(pl.col("k") == k).row(0, named=True) for k in (1, 10))
    assert plain["presentations"] == 20 and bsc["presentations"] == 2
    assert plain["tau_psi"] > 0.05 and plain["jaccard"] < 0.95
    assert bsc["jaccard"] > plain["jaccard"] and bsc["tau_psi"] < plain["tau_psi"]


def test_matched_rate_is_the_relevant_share_and_reads_the_same_presentations(coll):
    from posbias import metrics
    from posbias.stability import relevant_sets, scores_by_query

    c, _ = coll
    scorer = SimulatedGrader(grades_by_query(c.qrels), window=10, noise=0.3, order_noise=1.0, seed=3)
    runs, qrels = scored_runs(coll, scorer, 4)
    summary, per_query = stability_table(runs[0], runs[1:], qrels, 1, [1, 2], KEYS, COST)
    row = summary.row(0, named=True)
    assert row["k"] == 1 and math.isnan(summary.row(1, named=True)["jaccard_matched"])  # plain scorers only
    per_query = per_query.filter(pl.col("k") == 1)
    canonical, relevant = scores_by_query(runs[0]), relevant_sets(qrels, 1)
    pairs = [(q, d) for q, docs in canonical.items() for d in docs]
    assert row["matched_rate"] == pytest.approx(sum(d in relevant.get(q, ()) for q, d in pairs) / len(pairs))
    shown = [scores_by_query(r) for r in runs[1:]]
    over = {q: {d: [s[q][d] for s in shown] for d in canonical[q]} for q in canonical}
    expected = metrics.retention_jaccard(canonical, relevant, over, rate=row["matched_rate"])
    assert row["jaccard_matched"] == pytest.approx(expected["jaccard"])
    assert per_query["jaccard_matched"].mean() == pytest.approx(row["jaccard_matched"])
    assert row["retained"] == pytest.approx(metrics.retention_jaccard(canonical, relevant, over)["retained"])


def test_binary_qrels_count_grade_one_as_relevant_under_a_graded_threshold(coll):
    """OC-SFT's preset sets one relevant grade, 2, for collections graded 0–3 (TREC DL) and binary ones (BEIR):
    binary qrels count grade 1, so they still have relevant passages, so the F1-tuned retention
    threshold and its Jaccard are computed on them instead of on the score tail (NaN on 0.17.0)."""
    from posbias.config import relevant_grade
    from posbias.data.collection import relevance_threshold
    from posbias.stability import relevant_sets

    c, _ = coll
    scorer = SimulatedGrader(grades_by_query(c.qrels), window=10, noise=0.3, order_noise=1.0, seed=3)
    runs, qrels = scored_runs(coll, scorer, 4)
    binary = qrels.with_columns(pl.col("relevance").clip(0, 1))
    assert qrels["relevance"].max() == 3 and binary["relevance"].max() == 1
    assert relevant_sets(binary, 2) == relevant_sets(binary, 1) != {}
    assert relevant_sets(qrels, 2) != relevant_sets(qrels, 1)  # graded qrels keep the threshold
    at_two, _ = stability_table(runs[0], runs[1:], binary, 2, [1], KEYS, COST)
    at_one, _ = stability_table(runs[0], runs[1:], binary, 1, [1], KEYS, COST)
    assert at_two.equals(at_one) and math.isfinite(at_two["jaccard"][0]) and at_two["matched_rate"][0] > 0
    assert [relevance_threshold(2, top) for top in (None, 1, 2, 3)] == [2, 1, 2, 2]
    assert relevance_threshold(5, 2) == 5  # a graded collection keeps what it is told (a position order refuses it)
    config = {"reranking": {"relevant_grade": 2}, "datasets": {"dl19": {}, "scifact": {"relevant_grade": 1}}}
    assert (relevant_grade(config, "dl19"), relevant_grade(config, "scifact")) == (2, 1)


def test_a_single_presentation_has_no_stability():
    from posbias.stability import bsc_presentations

    shuffled = [{"q": {"a": float(i), "b": 1.0}} for i in range(5)]
    groups = bsc_presentations(shuffled, 2)
    assert len(groups) == 2 and groups[0]["q"]["a"] == 0.5 and groups[1]["q"]["a"] == 2.5
    assert len(bsc_presentations(shuffled, 1, limit=3)) == 3


def test_silver_labels_views_and_targets(coll):
    c, first = coll
    grades = grades_by_query(c.qrels)
    labels, cost = silver.silver_labels("qrels", first, c.queries, c.corpus, grades, 7, depth=40, window=20, shuffles=3)
    assert sorted(labels["view"].unique()) == [0, 1, 2, 3]
    per_view = labels.group_by("query_id", "view").len()
    assert per_view["len"].unique().to_list() == [40]
    assert labels["slot"].max() == 19 and labels["window"].max() == 1
    assert cost.height == 0  # qrels cost nothing
    q = labels["query_id"][0]
    top = first.filter(pl.col("query_id") == q).sort("rank")["doc_id"].head(40).to_list()
    anchor = labels.filter((pl.col("query_id") == q) & (pl.col("view") == 0)).sort("window", "slot")["doc_id"]
    assert anchor.to_list() == silver.anchored(Candidates(q, "", top, {}), 20, 7).doc_ids  # view 0: the anchor
    canonical = silver.instances(labels, c.queries, c.corpus, averaged=False)
    averaged = silver.instances(labels, c.queries, c.corpus, averaged=True)
    assert canonical.height == 2 * labels["query_id"].n_unique()
    assert canonical.filter(pl.col("query_id") == q)["doc_ids"].explode().to_list() == anchor.to_list()
    assert canonical["targets"].to_list() == averaged["targets"].to_list()  # qrels scores are order-free
    assert all(t in (0.0, 1 / 3, 2 / 3, 1.0) for ts in canonical["targets"] for t in ts)
    np.testing.assert_allclose(silver.slot_propensity(labels, 20), 1.0, atol=0.6)
    junk = {q: {d: -2 for d in docs} for q, docs in grades.items()}  # TREC's junk grade: a 0 label, not -2/3
    clipped, _ = silver.silver_labels("qrels", first, c.queries, c.corpus, junk, 7, depth=40, window=20, shuffles=0)
    assert clipped["score"].min() == 0.0
    consistency = silver.label_consistency(labels)  # silver-β of an order-free teacher: its ties only
    assert consistency["label_sd"] == 0.0
    assert silver.label_quality(labels, c.qrels) == pytest.approx(1.0)  # the qrels' own grades rank ideally
    assert math.isnan(silver.label_consistency(labels.filter(pl.col("view") == 0))["tau_psi"])


def test_slot_propensity_recovers_a_primacy_teacher(coll):
    c, first = coll
    grades = grades_by_query(c.qrels)
    teacher = SimulatedGrader(grades, window=20, noise=0.0, prior="linear", strength=2.0, seed=1)
    labels, cost = silver.silver_labels(teacher, first, c.queries, c.corpus, grades, 7, depth=40, window=20, shuffles=6,
                                        batch_size=8)
    pi = silver.slot_propensity(labels, 20)
    assert pi[0] > 1.5 * pi[-1] and np.all(np.diff(pi[[0, 5, 10, 15, 19]]) < 0)
    w = silver.slot_weights(pi, clip=10.0)
    assert w.mean() == pytest.approx(1.0) and w[-1] > w[0]
    assert int(cost["calls"].sum()) == labels["query_id"].n_unique() * 2 * 7  # 2 windows x (1 + 6) views
    biased = silver.label_consistency(labels)
    assert biased["tau_psi"] > 0.05 and biased["label_sd"] > 0.05  # the slot prior moves the labels
    # the slot prior also costs the labels quality: the same grader without it ranks the anchor better
    fair = SimulatedGrader(grades, window=20, noise=0.0, prior="none", seed=1)
    fair_labels, _ = silver.silver_labels(fair, first, c.queries, c.corpus, grades, 7, depth=40, window=20,
                                          shuffles=0, batch_size=8)
    assert silver.label_quality(labels, c.qrels) < silver.label_quality(fair_labels, c.qrels) - 0.05
    assert not math.isnan(labels["score"].mean())


def test_listwise_rankings_get_permsc_presentations(coll):
    """A listwise reranker's plain lists (one window over all 40): K = 1 rows from its rankings, K > 1
    rows PermSC@K over disjoint groups of K reranked shuffles, which steadies a position-biased ranker
    and leaves an order-free one perfectly stable; a debiased method (combine None) gets K = 1 only."""
    from posbias.rerankers.simulated import SimulatedReranker

    c, first = coll
    keys = {**KEYS, "family": "listwise"}
    psi = {}
    for strength in (0.0, 2.0):
        reranker = SimulatedReranker(grades_by_query(c.qrels), prior="linear", strength=strength, noise=0.5, seed=3)
        runs = []
        for name in ["original"] + [f"shuffled-{s}" for s in range(6)]:
            shown = present_candidates(first, c.queries, c.corpus, grades_by_query(c.qrels), orders.parse(name), 7, 40,
                                       1, 40)
            runs.append(rerank(reranker, shown.lists, window=40, step=40)[0])
        table, _ = stability_table(runs[0], runs[1:], c.qrels, 1, [1, 3], keys, ONE_CALL, combine="permsc",
                                   aggregation="kemeny")
        assert table["presentations"].to_list() == [6, 2]
        psi[strength] = table["tau_psi"].to_list()
        only_plain, _ = stability_table(runs[0], runs[1:], c.qrels, 1, [1, 3], keys, ONE_CALL, combine=None)
        assert only_plain["k"].to_list() == [1]
    assert psi[0.0] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert psi[2.0][1] < psi[2.0][0]  # PermSC@3 is steadier than one pass of the biased ranker


def test_stopping_draw_known_answers():
    """Stop after the first draw n whose aggregate's top-d set equals that of the ``patience`` draws before it."""
    from posbias.debias.adaptive import settled, stopping_draw

    a, b, c = ["x", "y", "z"], ["y", "x", "z"], ["x", "y", "w"]  # a, b: one top-3 set in two orders
    assert stopping_draw([a, a, a, a], patience=2, depth=3) == 3  # unchanged after draws 2 and 3
    assert stopping_draw([a, b, a], patience=2, depth=3) == 3  # the order within the top d does not count
    assert stopping_draw([a, b, a, b, a], patience=1, depth=1) == 5  # the top 1 never settles: the cap
    assert stopping_draw([a, c, c], patience=1, depth=2) == 2  # only the top 2 must hold
    assert stopping_draw([a, c, c], patience=1, depth=3) == 3
    assert stopping_draw([a, c, a, c], patience=1, depth=3) == 4
    assert stopping_draw([a], patience=1, depth=3) == 1
    assert not settled([a, a], patience=2, depth=3) and settled([c, a, b, a], patience=2, depth=3)
    with pytest.raises(ValueError, match="patience"):
        stopping_draw([a, a], patience=0, depth=3)


def test_adaptive_bsc_and_permsc_stop_early_only_on_settled_aggregates():
    """An order-free scorer stops after patience + 1 draws with BSC's mean; one whose top flips each
    draw pays the cap and gets BSC@K's (PermSC@K's) aggregate exactly."""
    from posbias.debias import maths
    from posbias.debias.adaptive import adaptive_bsc, adaptive_permsc

    same = [{"a": 3.0, "b": 2.0, "c": 1.0}] * 6
    scores, n = adaptive_bsc(same, patience=2, depth=3)
    assert n == 3 and scores == {"a": 3.0, "b": 2.0, "c": 1.0}
    flipping = [{"a": 3.0 if i % 2 else 0.0, "b": 1.5, "c": 1.0} for i in range(5)]  # a's mean crosses b's
    scores, n = adaptive_bsc(flipping, patience=2, depth=1)
    assert n == 5 and scores == {d: float(np.mean([s[d] for s in flipping])) for d in "abc"}
    central, n = adaptive_permsc([["a", "b", "c"]] * 4, "kemeny", patience=1, depth=3)
    assert (central, n) == (["a", "b", "c"], 2)
    lists = [["a", "b", "c"], ["b", "a", "c"], ["c", "b", "a"], ["a", "c", "b"]]
    central, n = adaptive_permsc(lists, "borda", patience=3, depth=3)
    assert n == 4 and central == maths.aggregate(lists, "borda")


def test_adaptive_rows_pay_fewer_draws_for_a_stable_scorer(coll):
    """The adaptive row shares the fixed K's presentations; a stable scorer stops early (draws ≤ the
    patience + 1 floor for an order-free one), an order-sensitive one draws more, and calls and tokens
    are the draws × one presentation's cost."""
    c, _ = coll
    draws = {}
    for order_noise in (0.0, 1.5):
        scorer = SimulatedGrader(grades_by_query(c.qrels), window=10, noise=0.3, order_noise=order_noise, seed=3)
        runs, qrels = scored_runs(coll, scorer, 12)
        t, per_query = stability_table(runs[0], runs[1:], qrels, 1, [1, 6], KEYS, COST, presentations=None,
                                       adaptive={"caps": [6], "patience": 2, "depth": 5})
        fixed, adaptive = (t.filter((pl.col("k") == 6) & (pl.col("budget") == b)).row(0, named=True)
                           for b in ("fixed", "adaptive"))
        assert fixed["presentations"] == adaptive["presentations"] == 2 and fixed["draws"] == 6.0
        assert 3.0 <= adaptive["draws"] <= 6.0
        assert adaptive["calls_per_query"] == pytest.approx(4.0 * adaptive["draws"])
        assert adaptive["tokens_per_query"] == pytest.approx(400.0 * adaptive["draws"])
        queries = per_query.filter(pl.col("budget") == "adaptive")
        assert queries["draws"].mean() == pytest.approx(adaptive["draws"])
        draws[order_noise] = adaptive["draws"]
        if order_noise == 0.0:
            assert adaptive["draws"] == 3.0 and adaptive["tau_psi"] == fixed["tau_psi"] == pytest.approx(0.0, abs=1e-12)
    assert draws[1.5] > draws[0.0]
