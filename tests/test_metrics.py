import math

import numpy as np
import polars as pl
import pytest

from posbias import metrics
from posbias.errors import PosbiasError
from posbias.runs import canonical

QRELS = pl.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "b", "z"], "relevance": [2, 1, 1]},
                     schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})


def test_known_values_and_missing_query_counts_zero():
    run = canonical(pl.DataFrame({"query_id": ["1", "1", "1"], "doc_id": ["x", "a", "b"], "score": [3.0, 2.0, 1.0]}))
    per_query = metrics.evaluate(run, QRELS, ["nDCG@10", "AP"], "sys", "ds")
    values = {(r["query_id"], r["measure"]): r["value"] for r in per_query.iter_rows(named=True)}
    dcg = 2 / math.log2(3) + 1 / math.log2(4)  # trec_eval's nDCG uses linear gains
    idcg = 2 + 1 / math.log2(3)
    assert values[("1", "nDCG@10")] == pytest.approx(dcg / idcg)
    assert values[("1", "AP")] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert values[("2", "nDCG@10")] == 0.0  # query 2 has qrels but no hits
    agg = metrics.aggregate(per_query)
    assert agg.filter(pl.col("measure") == "nDCG@10")["queries"].item() == 2


def test_perfect_run_scores_one():
    run = canonical(pl.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "b", "z"], "score": [2.0, 1.0, 1.0]}))
    agg = metrics.aggregate(metrics.evaluate(run, QRELS, ["nDCG@10"], "s", "d"))
    assert agg["value"].item() == pytest.approx(1.0)


def test_retrieval_table(tmp_path):
    from posbias.paper import write
    from posbias.paper.retrieval import retrieval_table

    run = canonical(pl.DataFrame({"query_id": ["1"], "doc_id": ["a"], "score": [1.0]}))
    table = retrieval_table(metrics.aggregate(metrics.evaluate(run, QRELS, ["nDCG@10", "R@100"], "s", "d")),
                            ["R@100", "nDCG@10"])
    md = write(table, tmp_path / "retrieval", "First-stage retrieval")[0].read_text().splitlines()
    assert md[2] == "| dataset | system | queries | R@100 | nDCG@10 |"
    assert md[4].startswith("| d | s | 2 | ")


DL_QRELS = pl.DataFrame({"query_id": ["1", "1", "1"], "doc_id": ["a", "b", "c"], "relevance": [3, 1, 0]},
                        schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})


def test_binary_measures_on_dl_graded_qrels_count_grade_two_as_anserini_does():
    """TREC DL's convention (trec_eval -l 2): the grade-1 passage is not relevant to AP and R@k there."""
    run = canonical(pl.DataFrame({"query_id": ["1", "1", "1"], "doc_id": ["b", "a", "c"], "score": [3.0, 2.0, 1.0]}))
    dl = {r["measure"]: r["value"] for r in metrics.evaluate(run, DL_QRELS, ["nDCG@10", "AP", "R@1", "AP(rel=1)"], "s",
                                                             "d").iter_rows(named=True)}
    assert set(dl) == {"nDCG@10", "AP(rel=2)", "R(rel=2)@1", "AP"}  # ir_measures names AP(rel=1) AP
    assert dl["AP(rel=2)"] == pytest.approx(1 / 2) and dl["R(rel=2)@1"] == 0.0  # only "a" (grade 3) counts
    assert dl["AP"] == pytest.approx((1 + 1) / 2)  # an explicit rel=1 is kept: "b" and "a" both count
    binary = metrics.evaluate(run, QRELS, ["AP", "R@1"], "s", "d")  # graded 1-2, not DL's scale: as written
    assert set(binary["measure"]) == {"AP", "R@1"}
    assert metrics.is_dl_graded(DL_QRELS) and not metrics.is_dl_graded(QRELS)
    one_query = DL_QRELS.filter(pl.col("relevance") < 3)  # a subset of DL qrels whose grades stop at 1
    subset = metrics.evaluate(run, one_query, ["AP"], "s", "d", dl_graded=True)
    assert subset["measure"].to_list() == ["AP(rel=2)"]
    cranfield = DL_QRELS.with_columns(relevance=pl.Series([4, 2, -1], dtype=pl.Int32))
    assert not metrics.is_dl_graded(cranfield)


def test_the_retrieval_table_puts_a_measures_dl_form_beside_it(tmp_path):
    from posbias.paper import write
    from posbias.paper.retrieval import retrieval_table

    run = canonical(pl.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "b"], "score": [2.0, 1.0]}))
    both = pl.concat([metrics.aggregate(metrics.evaluate(run, qrels, ["nDCG@10", "AP"], "s", name))
                      for name, qrels in (("dl", DL_QRELS), ("plain", QRELS))])
    md = write(retrieval_table(both, ["AP", "nDCG@10"]), tmp_path / "retrieval", "First-stage retrieval")[0]
    lines = md.read_text().splitlines()
    assert lines[2] == "| dataset | system | queries | AP | AP(rel=2) | nDCG@10 |", lines


def test_unknown_measure():
    with pytest.raises(PosbiasError, match="'nDGC@10' is not an ir_measures measure"):
        metrics.parse_measures(["nDGC@10"])


def test_tau_psi_known_values():
    a = ["a", "b", "c", "d"]
    assert metrics.tau_psi([a, a, list(a)]) == 0.0
    assert metrics.tau_psi([a, a[::-1]]) == pytest.approx(1.0)
    # one adjacent swap of 4 items: tau = 1 - 2 * 1/6 = 2/3, psi = 1/6
    assert metrics.tau_psi([a, ["b", "a", "c", "d"]]) == pytest.approx(1 / 6)
    # three rankings: mean over the three pairs
    psi = metrics.tau_psi([a, a[::-1], a])
    assert psi == pytest.approx((1 - (-1 - 1 + 1) / 3) / 2)


def test_the_permutation_kendall_tau_is_scipys_to_the_last_bit():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 20, 100):
        for _ in range(30):
            x, y = rng.permutation(n), rng.permutation(n)
            assert metrics.permutation_kendall_tau(x, y) == kendalltau(x, y).statistic
    assert metrics.permutation_kendall_tau([0, 1, 2], [2, 1, 0]) == -1.0
    with pytest.raises(ValueError, match="without ties"):
        metrics.permutation_kendall_tau([0, 0, 1], [0, 1, 2])


def test_tau_psi_rejects_mismatched_items():
    with pytest.raises(ValueError):
        metrics.tau_psi([["a", "b"], ["a", "c"]])
    with pytest.raises(ValueError):
        metrics.tau_psi([["a", "b"]])


def test_retention_jaccard_known_answers():
    from posbias.metrics import retention_jaccard

    canonical = {"q1": {"a": 0.9, "b": 0.8, "c": 0.1}, "q2": {"x": 0.7, "y": 0.2}}
    relevant = {"q1": {"a", "b"}, "q2": {"x"}}
    # order-invariant: every presentation scores like the canonical order -> Jaccard 1, perfect F1
    same = {q: {d: [s] * 4 for d, s in docs.items()} for q, docs in canonical.items()}
    out = retention_jaccard(canonical, relevant, same)
    assert out["jaccard"] == 1.0 and out["f1"] == 1.0
    assert 0.2 < out["threshold"] <= 0.7  # the highest threshold that keeps a, b and x
    # one presentation drops b in q1: the 4 presentations give pairs (3 of 6 differ) with Jaccard 1/2
    flip = {q: {d: list(v) for d, v in docs.items()} for q, docs in same.items()}
    flip["q1"]["b"][0] = 0.0
    out = retention_jaccard(canonical, relevant, flip)
    assert out["jaccard"] == pytest.approx(((3 * 0.5 + 3 * 1.0) / 6 + 1.0) / 2)
    # two empty retained sets count as 1
    empty = {"q": {"a": 0.1, "b": 0.2}}
    out = retention_jaccard(empty, {"q": set()}, {"q": {"a": [0.0, 0.0], "b": [0.0, 0.0]}})
    assert out["jaccard"] == 1.0


def test_retention_jaccard_ties_go_to_the_higher_threshold():
    from posbias.metrics import retention_jaccard

    # every threshold in (0.5, 1.0] retains only "a" = the relevant set: the highest grid point wins
    out = retention_jaccard({"q": {"a": 1.0, "b": 0.0}}, {"q": {"a"}}, {"q": {"a": [1.0, 1.0], "b": [0.0, 0.0]}}, 5)
    assert out["threshold"] == 1.0 and out["f1"] == 1.0


def test_rate_threshold_and_the_matched_rate_reading_known_answers():
    from posbias.metrics import rate_threshold, retention_jaccard

    canonical = {"q1": {"a": 0.9, "b": 0.8, "c": 0.1}, "q2": {"x": 0.7, "y": 0.2}}
    assert rate_threshold(canonical, 0.4) == 0.8  # 2 of the 5 pooled scores
    assert rate_threshold(canonical, 0.01) == 0.9 and rate_threshold(canonical, 1.0) == 0.1  # at least one kept
    with pytest.raises(ValueError, match="rate"):
        rate_threshold(canonical, 0.0)
    relevant = {"q1": {"a", "b"}, "q2": {"x"}}
    # at rate 0.4 the threshold 0.8 keeps {a, b} and nothing of q2, whatever F1 would choose (0.7 keeps x too)
    over = {"q1": {"a": [0.9, 0.9], "b": [0.8, 0.5], "c": [0.1, 0.1]}, "q2": {"x": [0.7, 0.75], "y": [0.2, 0.2]}}
    matched = retention_jaccard(canonical, relevant, over, rate=0.4)
    assert matched["threshold"] == 0.8 and matched["retained"] == pytest.approx(0.4)
    assert matched["per_query"] == {"q1": 0.5, "q2": 1.0}  # q1: {a, b} vs {a}; q2: two empty sets
    assert matched["f1"] == pytest.approx((1.0 + 0.0) / 2)  # q2 keeps nothing of its one relevant document
    tuned = retention_jaccard(canonical, relevant, over)
    assert tuned["threshold"] <= 0.7 and tuned["retained"] == pytest.approx(0.6) and tuned["f1"] == 1.0


def test_tie_rate_and_dispersion_by_hand():
    assert metrics.tie_rate([0.5, 0.5, 0.5, 1.0]) == pytest.approx(3 / 6)  # 3 of 6 pairs tied
    assert metrics.tie_rate([0.1, 0.2, 0.3]) == 0.0 and metrics.tie_rate([1.0]) == 0.0
    assert metrics.score_dispersion([0.0, 1.0]) == pytest.approx(0.5)
    assert metrics.score_dispersion([0.3] * 5) == 0.0


def test_topk_instability_by_hand():
    a, b, c = list("abcdefghij"), list("abcdefghkl"), list("jihgfedcba")
    assert metrics.topk_instability([a, c], k=10) == 0.0  # the same top 10, reordered
    assert metrics.topk_instability([a, b], k=10) == pytest.approx(1 - 8 / 12)
    assert metrics.topk_instability([a[:2], ["x", "y"]], k=2) == 1.0


def test_pool_psi_of_kept_documents():
    kept = ["a", "b", "c"]
    fixed = {"a": 0.9, "b": 0.5, "c": 0.1}
    pools = [{**fixed, "x": 0.7}, {**fixed, "y": 0.95, "z": 0.0}]
    assert metrics.pool_psi(pools, kept) == 0.0  # companions change, the kept documents' order does not
    flipped = [{"a": 0.9, "b": 0.5, "c": 0.1}, {"a": 0.1, "b": 0.5, "c": 0.9}]
    assert metrics.pool_psi(flipped, kept) == pytest.approx(1.0)  # reversed by the pool


def test_variance_decomposition_recovers_its_parts():
    """score = document effect + companion effect (per document and pool) + order effect: each part's
    variance comes back, and the parts add up to the total."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(0)
    docs, pools, orders = 40, 6, 5
    d_eff, c_eff, o_eff = rng.normal(0, 1.0, docs), rng.normal(0, 0.5, (docs, pools)), rng.normal(0, 0.2, (docs, pools, orders))
    rows = [(f"d{d}", p, o, d_eff[d] + c_eff[d, p] + o_eff[d, p, o])
            for d, p, o in itertools.product(range(docs), range(pools), range(orders))]
    frame = pl.DataFrame(rows, schema=["doc_id", "pool", "order", "score"], orient="row")
    parts = metrics.variance_decomposition(frame)
    assert parts["document"] + parts["companions"] + parts["order"] == pytest.approx(parts["total"])
    assert parts["order"] == pytest.approx(float(o_eff.var(axis=2).mean()))
    assert parts["companions"] == pytest.approx(float((c_eff + o_eff.mean(2)).var(axis=1).mean()))
    assert parts["document"] > parts["companions"] > parts["order"] > 0
    invariant = frame.with_columns(score=pl.col("doc_id").str.slice(1).cast(pl.Float64))
    assert metrics.variance_decomposition(invariant)["companions"] == 0.0
    with pytest.raises(ValueError, match="same number of pools and orders"):
        metrics.variance_decomposition(frame.head(frame.height - 1))


def test_retention_jaccard_reports_each_query():
    canonical = {"q1": {"a": 0.9, "b": 0.1}, "q2": {"c": 0.8, "d": 0.2}}
    over = {"q1": {"a": [0.9, 0.9], "b": [0.1, 0.1]}, "q2": {"c": [0.8, 0.1], "d": [0.2, 0.2]}}
    result = metrics.retention_jaccard(canonical, {"q1": {"a"}, "q2": {"c"}}, over)
    assert result["per_query"] == {"q1": 1.0, "q2": 0.0}
    assert result["jaccard"] == pytest.approx(0.5)


def test_zengs_position_sensitivity_index_has_its_readme_known_answer():
    from posbias.metrics import position_sensitivity_index

    assert position_sensitivity_index([0.9503, 0.9246, 0.9400]) == pytest.approx(1 - 0.9246 / 0.9503)
    assert round(position_sensitivity_index([0.9503, 0.9246]), 3) == 0.027  # their README's example
    assert position_sensitivity_index([0.5, 0.5, 0.5]) == 0.0  # position-robust
    assert position_sensitivity_index([0.8, 0.0]) == 1.0  # one subset scored 0
    for bad in ([], [0.0, 0.0], [0.5, -0.1]):
        with pytest.raises(ValueError, match="max > 0"):
            position_sensitivity_index(bad)
