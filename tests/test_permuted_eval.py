"""Known answers of the permuted evaluation with the simulated reranker."""

import polars as pl
import pytest

from posbias import config, debias, orders, permuted_eval
from posbias.data import synthetic
from posbias.rerank import Candidates, rerank
from posbias.rerankers.simulated import SimulatedReranker
from posbias.runs import canonical

SPEC = synthetic.SyntheticSpec(n_docs=400, n_test_queries=30, n_train_queries=1)


@pytest.fixture(scope="module")
def collection():
    coll = synthetic.generate(SPEC, "test")
    # a first-stage run: qrels order scrambled by a fixed hash, 20 candidates per query
    rows = []
    for qid in coll.queries["query_id"].to_list():
        docs = coll.qrels.filter(pl.col("query_id") == qid).sort("doc_id")["doc_id"].to_list()[:20]
        if len(docs) < 20:
            continue  # every query gets every position, so curves compare the same queries
        rows += [(qid, d, float(-i)) for i, d in enumerate(docs)]
    first = canonical(pl.DataFrame(rows, schema=["query_id", "doc_id", "score"], orient="row"))
    return coll, first


def _wrap(base, name, **capcal):
    """``base`` with debiasing ``name`` in the schema's default settings, CapCal's overridden by ``capcal``."""
    rr = config.defaults("reranking")
    return debias.wrap(base, name, 0, debias.options({**rr, "capcal": {**rr["capcal"], **capcal}}, name))


def _evaluate(coll, first, reranker, order_names):
    texts = dict(coll.corpus.select("doc_id", "text").iter_rows())
    qtext = dict(coll.queries.iter_rows())
    relevant = {q: set(d) for q, d in coll.qrels.filter(pl.col("relevance") >= 1).group_by("query_id")
                .agg(pl.col("doc_id")).iter_rows()}
    cands = dict(first.sort("query_id", "rank").group_by("query_id", maintain_order=True).agg(pl.col("doc_id")).iter_rows())
    reranked = {}
    for name in order_names:
        order = orders.parse(name)
        lists = []
        for qid, docs in cands.items():
            presented = orders.present(docs, order, 7, qid, relevant.get(qid, set()), 20)
            if presented is not None:
                lists.append(Candidates(qid, qtext[qid], presented, texts))
        reranked[name], _, _ = rerank(reranker, lists)
    return reranked


ORDERS = ["original"] + [f"shuffled-{s}" for s in range(6)] + [f"position-{p}" for p in range(1, 21)]


def _grades(coll):
    grades = {}
    for q, d, g in coll.qrels.iter_rows():
        grades.setdefault(q, {})[d] = g
    return grades


def test_no_prior_means_no_sensitivity_and_a_flat_curve(collection):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior="none", noise=0.3, seed=1)
    reranked = _evaluate(coll, first, sim, ORDERS)
    psi, n = permuted_eval.psi_over_shuffles(reranked)
    assert psi == 0.0 and n == first["query_id"].n_unique() > 20
    curve = permuted_eval.position_curve(reranked, first, coll.qrels, 7, 1, 20, {})
    assert curve.height == 20
    assert curve["target_rank"].n_unique() == 1  # exactly flat
    per_query = permuted_eval.condition_metrics(reranked, coll.qrels, ["nDCG@10"], "sim", "syn", "x")
    ndcg = per_query.group_by("order").agg(pl.col("value").mean())
    assert ndcg.filter(pl.col("order").str.starts_with("shuffled"))["value"].n_unique() == 1


@pytest.mark.parametrize("prior", ["linear", "primacy"])
def test_a_prior_makes_psi_positive_and_the_curve_fall(collection, prior):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior=prior, strength=2.0, noise=0.3, seed=1)
    reranked = _evaluate(coll, first, sim, ORDERS)
    psi, _ = permuted_eval.psi_over_shuffles(reranked)
    assert psi > 0.05
    curve = permuted_eval.position_curve(reranked, first, coll.qrels, 7, 1, 20, {})
    ranks = curve["target_rank"].to_list()
    assert ranks[0] < ranks[-1]  # worse (larger) rank when the passage is shown late
    assert curve["target_ndcg10"][0] > curve["target_ndcg10"][-1]


def test_u_shaped_prior_sags_in_the_middle(collection):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior="u_shaped", strength=3.0, noise=0.3, seed=1)
    curve = permuted_eval.position_curve(_evaluate(coll, first, sim, ORDERS), first, coll.qrels, 7, 1, 20, {})
    ranks = curve["target_rank"].to_list()
    assert ranks[9] > ranks[0] and ranks[9] > ranks[19]


def _spread(curve, column="target_ndcg10"):
    values = curve[column].to_list()
    return max(values) - min(values)


@pytest.mark.parametrize("prior, strength", [("linear", 0.5), ("linear", 0.8), ("primacy", 0.6), ("u_shaped", 0.6)])
def test_capcal_flattens_an_additive_position_curve(collection, prior, strength):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior=prior, strength=strength, noise=0.3, seed=1,
                            bias_space="probability")
    positions = [f"position-{p}" for p in range(1, 21)]
    raw = permuted_eval.position_curve(_evaluate(coll, first, sim, positions), first, coll.qrels, 7, 1, 20, {})
    cal = permuted_eval.position_curve(_evaluate(coll, first, _wrap(sim, "capcal", alpha=1.0), positions), first,
                                       coll.qrels, 7, 1, 20, {})
    assert _spread(raw) > 0.2
    assert _spread(cal) <= 0.2 * _spread(raw), (_spread(raw), _spread(cal))


def test_capcal_alpha_zero_and_uniform_prior_change_nothing(collection):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior="linear", strength=1.0, noise=0.3, seed=1)
    flat = SimulatedReranker(_grades(coll), prior="none", noise=0.3, seed=1)
    orders_ = ["original", "shuffled-0", "position-5"]
    base = _evaluate(coll, first, sim, orders_)
    assert all(base[o].equals(r) for o, r in _evaluate(coll, first, _wrap(sim, "capcal", alpha=0.0), orders_).items())
    flat_base = _evaluate(coll, first, flat, orders_)
    assert all(flat_base[o].equals(r) for o, r in _evaluate(coll, first, _wrap(flat, "capcal"), orders_).items())


def test_permsc_beats_a_single_shuffled_pass(collection):
    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior="linear", strength=1.5, noise=0.3, seed=1)
    shuffles = [f"shuffled-{s}" for s in range(6)]
    plain = _evaluate(coll, first, sim, shuffles)
    psc = _evaluate(coll, first, _wrap(sim, "permsc-window@10"), shuffles)

    def mean_ndcg(reranked):
        m = permuted_eval.condition_metrics(reranked, coll.qrels, ["nDCG@10"], "s", "d", "r")
        return m["value"].mean()

    assert mean_ndcg(psc) > mean_ndcg(plain)
    assert permuted_eval.psi_over_shuffles(psc)[0] < permuted_eval.psi_over_shuffles(plain)[0]
    bsc = _evaluate(coll, first, _wrap(sim, "bsc@10"), shuffles)
    assert mean_ndcg(bsc) > mean_ndcg(plain)
    assert permuted_eval.psi_over_shuffles(bsc)[0] < permuted_eval.psi_over_shuffles(plain)[0]


def test_list_level_permsc_aggregates_reranked_shuffles(collection):
    """The papers' PermSC: K reranked shuffled full lists, one central ranking; better than one shuffled
    pass, and its cost is the K passes."""
    from posbias.debias import list_level

    coll, first = collection
    sim = SimulatedReranker(_grades(coll), prior="linear", strength=1.5, noise=0.3, seed=1)
    shuffles = [f"shuffled-{s}" for s in range(6)]
    plain = _evaluate(coll, first, sim, shuffles)
    central = list_level.aggregate_runs([plain[o] for o in shuffles], "kemeny")

    def mean_ndcg(reranked):
        return permuted_eval.condition_metrics(reranked, coll.qrels, ["nDCG@10"], "s", "d", "r")["value"].mean()

    assert mean_ndcg({"original": central}) > mean_ndcg(plain) + 0.02
    one = list_level.aggregate_runs([plain["shuffled-0"]], "kemeny")
    assert one.select("query_id", "doc_id", "rank").equals(plain["shuffled-0"].select("query_id", "doc_id", "rank"))
    # a majority of identical rankings wins: it agrees with the majority on every pair, so it is the
    # unique Kemeny optimum; every query keeps all its candidates
    majority = [plain["shuffled-0"], plain["shuffled-0"], plain["shuffled-1"]]
    twice = list_level.aggregate_runs(majority, "kemeny")
    assert plain["shuffled-0"]["doc_id"].to_list() != plain["shuffled-1"]["doc_id"].to_list()
    assert (twice.sort("query_id", "rank").select("query_id", "doc_id")
            .equals(plain["shuffled-0"].sort("query_id", "rank").select("query_id", "doc_id")))
    borda = list_level.aggregate_runs(majority, "borda")
    assert borda.group_by("query_id").len()["len"].to_list() == [20] * borda["query_id"].n_unique()
    cost = pl.DataFrame({"query_id": ["a", "b"], "windows": [1, 1], "calls": [1, 2], "prompt_tokens": [10, 20],
                         "seconds": [0.5, 1.0]})
    assert list_level.summed_costs([cost] * 3)["calls"].to_list() == [3, 6]


def test_local_kemenisation_is_close_to_the_exact_optimum():
    """Beyond EXACT_KEMENY_MAX items PermSC uses Borda + single-item moves; on lists where the exact MILP
    is still fast its total Kendall distance is within 1% of the optimum (bench/kemeny_gap.py reports it)."""
    import random

    from posbias import debias

    rng = random.Random(3)
    items = [f"d{i}" for i in range(16)]
    for _ in range(5):
        base = items[:]
        rng.shuffle(base)
        rankings = []
        for _ in range(5):  # noisy copies of one ranking, as K reranked shuffles are
            r = base[:]
            for _ in range(12):
                i = rng.randrange(len(r) - 1)
                r[i], r[i + 1] = r[i + 1], r[i]
            rankings.append(r)
        exact = debias.kendall_distance_total(debias.kemeny(rankings), rankings)
        local = debias.kendall_distance_total(debias.local_search(debias.borda(rankings), rankings), rankings)
        assert exact <= local <= 1.01 * exact


def test_the_position_curves_interval_over_queries_brackets_its_mean_and_is_seeded():
    """The band of the position-curve figure: a 95% percentile bootstrap interval of the mean over queries;
    the point itself where every query scores the same; NaN for one query; the same for the same seed."""
    import math

    import numpy as np

    values = np.array([0.0, 1.0] * 20)
    low, high = permuted_eval.query_interval(values, seed=42)
    assert 0.0 <= low < 0.5 < high <= 1.0 and (low, high) == permuted_eval.query_interval(values, seed=42)
    assert 0.3 < low and high < 0.7  # the mean of 40 coin flips: about ± 0.15
    assert permuted_eval.query_interval(np.full(7, 0.25), seed=1) == (0.25, 0.25)
    assert all(math.isnan(v) for v in permuted_eval.query_interval(np.array([1.0]), seed=1))
