"""Decision-stability metrics on the simulated grader (known answers) and silver labels."""

import math

import numpy as np
import polars as pl
import pytest

from posbias import orders, silver
from posbias.data import synthetic
from posbias.data.collection import grades_by_query
from posbias.rerank import present_candidates, rerank
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
    return stability_table(runs[0], runs[1:], qrels, 1, list(ks), {"model": "m", "dataset": "d", "retriever": "r"}, 4.0,
                           presentations=None)


def test_order_invariant_scorer_is_perfectly_stable(coll):
    t = table(coll, 0.0, shuffles=4, ks=(1, 2))
    row = t.filter(pl.col("k") == 1).row(0, named=True)
    assert row["tau_psi"] == pytest.approx(0.0, abs=1e-12)
    assert row["jaccard"] == 1.0
    assert row["ndcg10"] == pytest.approx(row["ndcg10_canonical"])
    assert t.filter(pl.col("k") == 2)["calls_per_query"][0] == 8.0


def test_order_noise_breaks_stability_and_bsc_restores_it(coll):
    t = table(coll, 1.5)
    plain, bsc = (t.filter(pl.col("k") == k).row(0, named=True) for k in (1, 10))
    assert plain["presentations"] == 20 and bsc["presentations"] == 2
    assert plain["tau_psi"] > 0.05 and plain["jaccard"] < 0.95
    assert bsc["jaccard"] > plain["jaccard"] and bsc["tau_psi"] < plain["tau_psi"]


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
    canonical = silver.instances(labels, c.queries, c.corpus, averaged=False)
    averaged = silver.instances(labels, c.queries, c.corpus, averaged=True)
    assert canonical.height == 2 * labels["query_id"].n_unique()
    assert canonical["targets"].to_list() == averaged["targets"].to_list()  # qrels scores are order-free
    assert all(t in (0.0, 1 / 3, 2 / 3, 1.0) for ts in canonical["targets"] for t in ts)
    np.testing.assert_allclose(silver.slot_propensity(labels, 20), 1.0, atol=0.6)


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
    assert not math.isnan(labels["score"].mean())
