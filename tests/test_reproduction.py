"""The reproduction matrix (posbias.reproduction): the expected figures are the papers' words, each
statistic's known answers, matching by content, and the marks (OK, differs, not run)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
import yaml

from posbias import config as pbconfig
from posbias import reproduction
from posbias.reproduction import identity, statistics
from tests.conftest import REPO

EXPECTED = sorted((REPO / "config" / "reproduction").glob("*.yaml"))
EXPECTED = [p for p in EXPECTED if p.name != "identities.yaml"]
IDENTITIES = identity.load(REPO / "config" / "reproduction" / "identities.yaml")


def test_every_quote_is_verbatim_in_the_papers(shared_data):
    papers = shared_data.parent / "papers"
    checked = 0
    for path in EXPECTED:
        doc = yaml.safe_load(path.read_text())
        texts = [(papers / name).read_text() for name in doc.get("texts", [])]
        for figure in doc["figures"]:
            if "quote" in figure:
                assert any(figure["quote"] in t for t in texts), f"{path.name}: {figure['id']}: quote not verbatim"
                checked += 1
            else:  # a published baseline cites its source instead
                assert doc["paper"] == "published" and figure["source"]
    assert checked >= 70


def test_every_condition_names_known_identities_and_every_paper_has_figures():
    figures = reproduction.load(EXPECTED)
    groups = IDENTITIES["groups"]
    for f in figures:
        conditions = [f.condition] + ([f.condition["versus"]] if isinstance(f.condition.get("versus"), dict)
                                      else f.condition.get("versus", []))
        for c in conditions:
            names = c.get("dataset", [])
            for name in groups.get(names, [names]) if isinstance(names, str) else names:
                assert name in IDENTITIES["collections"], (f.id, name)
            assert c.get("model", "ocsft") in IDENTITIES["models"], (f.id, c.get("model"))
            assert c.get("retriever", "bm25") in IDENTITIES["retrievers"], (f.id, c.get("retriever"))
    assert {f.paper for f in figures} == {"debiasfirst", "capcal", "ocsft", "published"}


def test_a_bad_figure_is_one_line_naming_the_file_and_figure(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"paper": "x", "figures": [
        {"id": "a", "where": "T1", "quote": "q", "statistic": "rerank", "value": 1, "why": "w",
         "condition": {"dataset": "dl19", "retriever": "bm25", "model": "m", "order": "original"}}]}))
    with pytest.raises(ValueError, match=r"bad.yaml: figure 'a': condition: missing measure"):
        reproduction.load([bad])
    bad.write_text(yaml.safe_dump({"paper": "x", "figures": [{"id": "a", "where": "T1", "statistic": "rerank",
                                                             "value": 1, "why": "w", "condition": {}}]}))
    with pytest.raises(ValueError, match=r"bad.yaml: figures/0"):
        reproduction.load([bad])


# ---- known answers of the statistics ------------------------------------------------------------------

def _rerank_rows(model, dataset, debias, values_by_order):
    rows = []
    for order, values in values_by_order.items():
        for i, v in enumerate(values):
            rows.append({"model": model, "dataset": dataset, "retriever": "r", "order": order, "debias": debias,
                         "query_id": f"q{i}", "measure": "nDCG@10", "value": float(v)})
    return rows


def _bound(**extra):
    return {"cells": [("d1", "r")], "models": ["a"], "debias": "none", "order": "original", "measure": "nDCG@10",
            **extra}


RERANK = pl.DataFrame(
    _rerank_rows("a", "d1", "none", {"original": [0.2, 0.4], "shuffled-0": [0.1, 0.3], "shuffled-1": [0.5, 0.5],
                                     "shuffled-2": [0.3, 0.3]})
    + _rerank_rows("b", "d1", "none", {"original": [0.1, 0.1], "shuffled-0": [0.4, 0.4], "shuffled-1": [0.2, 0.2],
                                       "shuffled-2": [0.2, 0.2]})
    + _rerank_rows("b", "d1", "permsc@2", {"original": [0.25, 0.25]})
    + _rerank_rows("b", "d1", "permsc@3", {"original": [0.35, 0.35]})
    + _rerank_rows("a", "d2", "none", {"original": [0.6, 0.6]})
    + _rerank_rows("b", "d2", "none", {"original": [0.7, 0.7]}))


def test_rerank_means_over_queries_then_shuffles_then_collections():
    assert statistics.rerank(RERANK, _bound()).values == pytest.approx([0.3])
    assert statistics.rerank(RERANK, _bound(order="shuffled")).values == pytest.approx([(0.2 + 0.5 + 0.3) / 3])
    two = _bound(cells=[("d1", "r"), ("d2", "r")])
    assert statistics.rerank(RERANK, two).values == pytest.approx([(0.3 + 0.6) / 2])
    with pytest.raises(statistics.NotRun, match="no shuffled orders"):
        statistics.rerank(RERANK, _bound(order="shuffled", models=["a"], cells=[("d2", "r")]))


def test_gain_wins_variance_and_peak_by_hand():
    versus = {"cells": [("d1", "r")], "models": ["b"], "debias": "none"}
    assert statistics.rerank_gain(RERANK, _bound(versus=[versus])).values == pytest.approx([0.3 - 0.1])
    # per shuffle seed: a 0.2, 0.5, 0.3 against b 0.4, 0.2, 0.2 -> 2 wins of 3
    wins = statistics.rerank_wins(RERANK, _bound(units="shuffles", order="shuffled", versus=[versus]))
    assert wins.values == [2.0] and wins.note == "of 3 shuffles"
    # against PermSC@3 (one list, 0.35) every seed: 0.5 only -> 1
    permsc = {**versus, "debias": "permsc@3"}
    assert statistics.rerank_wins(RERANK, _bound(units="shuffles", order="shuffled", versus=[permsc])).values == [1.0]
    # run i against PermSC over the first i shuffles (DebiasFirst's Figure 5): seed 0 against b's plain shuffle 0
    # (0.2 < 0.4), seed 1 against PermSC@2 (0.5 > 0.25), seed 2 against PermSC@3 (0.3 < 0.35) -> 1 of 3
    per_run = {**versus, "debias": "aggregate@run"}
    bound = _bound(units="shuffles", order="shuffled", versus=[per_run])
    assert statistics.rerank_wins(RERANK, bound).values == [1.0]
    files = statistics.STATISTICS["rerank_wins"].files(bound, {"results/metrics/rerank/b/d1/r/permsc@2.parquet"})
    assert files[0].endswith("a/d1/r/none.parquet") and files[1].endswith("b/d1/r/none.parquet")
    assert files[2].endswith("b/d1/r/permsc@2.parquet") and len(files) == 3
    # by datasets: d1 a 0.3 > b 0.1, d2 a 0.6 < b 0.7 -> 1 of 2
    both = _bound(units="datasets", cells=[("d1", "r"), ("d2", "r")], versus=[{**versus, "cells": [("d1", "r"), ("d2", "r")]}])
    assert statistics.rerank_wins(RERANK, both).values == [1.0]
    # two queries cannot make a significant Wilcoxon test: no significant win
    assert statistics.rerank_wins(RERANK, {**both, "significant": True}).values == [0.0]
    variance = statistics.rerank_variance(RERANK, _bound())
    assert variance.values == pytest.approx([7 / 300])  # var(0.2, 0.5, 0.3; n - 1): (0.0178 + 0.0278 + 0.0011) / 2
    # b: K = 1 is the mean over shuffles (0.2667), PermSC@2 0.25, PermSC@3 0.35 -> K = 3
    assert statistics.permsc_peak(RERANK, _bound(models=["b"])).values == [3.0]


def test_scale_applies_by_the_statistics_power():
    figure = reproduction.Expected(id="v", paper="p", where="w", statistic="rerank_variance", condition={},
                                   value=200.0, why="", scale=100, tolerance=1)
    row = reproduction.row(figure, statistics.Measured([0.02]))
    assert row["run_mean"] == pytest.approx(200.0) and row["mark"] == reproduction.OK  # points squared
    count = reproduction.Expected(id="c", paper="p", where="w", statistic="rerank_wins", condition={}, value=2,
                                  why="", scale=100)
    assert reproduction.row(count, statistics.Measured([2.0]))["mark"] == reproduction.OK


STABILITY = pl.DataFrame([  # b's adaptive row at K = 10 is not BSC@10's: the statistics read fixed budgets only
    {"model": m, "dataset": d, "retriever": "r", "debias": "none", "family": "pointwise", "k": k, "budget": budget,
     "presentations": 10, "queries": 5, "ndcg10_canonical": 0.5, "ndcg10": nd, "tau_psi": tau, "jaccard": jac,
     "threshold": 0.5, "f1": 0.5, "calls_per_query": 1.0, "tie_rate": 0.0, "dispersion": 0.1, "top10_instability": 0.2,
     "plain_shift": 0.0}
    for m, d, k, budget, nd, tau, jac in [
        ("a-s1", "d1", 1, "fixed", 0.45, 0.08, 0.8), ("a-s2", "d1", 1, "fixed", 0.47, 0.10, 0.9),
        ("b", "d1", 1, "fixed", 0.44, 0.2, 0.6), ("b", "d1", 10, "fixed", 0.46, 0.05, 0.95),
        ("b", "d1", 10, "adaptive", 0.40, 0.30, 0.5)]])


def test_stability_statistics_by_hand():
    bound = {"cells": [("d1", "r")], "models": ["a-s1", "a-s2"], "column": "tau_psi"}
    assert statistics.stability(STABILITY, bound).values == pytest.approx([0.08, 0.10])
    assert statistics.stability(STABILITY, {**bound, "models": ["b"], "k": 10}).values == pytest.approx([0.05])
    versus = {"cells": [("d1", "r")], "models": ["b"]}
    gain = statistics.stability_gain(STABILITY, {**bound, "column": "jaccard", "versus": [versus]})
    assert gain.values == pytest.approx([0.2, 0.3])
    spread = statistics.stability_spread(STABILITY, {**bound, "column": "ndcg10", "versus": [versus]})
    assert spread.values == pytest.approx([0.46 - 0.44])
    figure = reproduction.Expected(id="s", paper="p", where="w", statistic="stability", condition={}, value=0.09,
                                   why="", tolerance=0.005)
    row = reproduction.row(figure, statistics.stability(STABILITY, bound))
    assert row["run_mean"] == pytest.approx(0.09) and row["run_sd"] == pytest.approx(math.sqrt(0.0002))
    assert row["seeds"] == 2 and row["mark"] == reproduction.OK


def test_a_figure_pooled_over_bases_binds_every_bases_seeds_or_says_how_many_it_lacks():
    """OC-SFT's Figure 3 (11 bases × 18 collections): on 0.17.0 it took Table 1's condition (one base) and so
    reported Table 1's gain against Figure 3's number."""
    from posbias.reproduction.matrix import bind

    names = identity.Names({"c": ["d1"]}, {("d1", "bm25"): "bm25"}, {"oc": [["x-s1", "x-s2"], ["y-s1"]], "so": [["z"]]}, {})
    available = {statistics.of_kind("stability")({"cells": [("d1", "bm25")], "models": [m]}, set())[0]
                 for m in ("x-s1", "x-s2", "y-s1", "z")}
    figure = reproduction.Expected(id="f", paper="p", where="w", statistic="stability_gain", value=0.2, why="",
                                   condition={"dataset": "c", "retriever": "bm25", "model": "oc", "bases": 2,
                                              "column": "jaccard", "versus": {"model": "so", "bases": 1}})
    assert bind(figure, names, available)["bound"]["models"] == ["x-s1", "x-s2", "y-s1"]
    three = reproduction.Expected(**{**figure.__dict__, "condition": {**figure.condition, "bases": 3}})
    assert bind(three, names, available) == {"reason": "the figure pools 3 base models' oc; this run has 2 (the "
                                                       "identities file names its bases)"}
    one = {k: v for k, v in figure.condition.items() if k != "bases"}
    assert bind(reproduction.Expected(**{**figure.__dict__, "condition": one}), names, available)["bound"]["models"] \
        == ["x-s1", "x-s2"]  # without `bases`: the first variant that has its files


def test_decisions_pool_propensity_and_listwise_by_hand():
    decisions = pl.DataFrame({"model": ["a"] * 4, "dataset": ["d1"] * 4, "retriever": ["r"] * 4, "consumer": ["qa"] * 4,
                              "query_id": list("wxyz"), "presentations": [10] * 4, "quality": [1.0, 0.0, 1.0, 1.0],
                              "flip": [0.0, 0.1, 0.2, 0.3], "verdict_flip": [0.0] * 4, "retained": [3.0] * 4})
    assert statistics.decisions(decisions, {"cells": [("d1", "r")], "models": ["a"], "column": "flip"}).values == \
        pytest.approx([0.15])
    pool = pl.DataFrame({"model": ["a", "a", "b"], "dataset": ["d1"] * 3, "retriever": ["r"] * 3,
                         "query_id": ["q1", "q2", "q1"], "pools": [8] * 3, "pool_psi": [0.02, 0.04, 0.1],
                         "document": [1.0, 1.0, 1.0], "companions": [0.3, 0.1, 0.8], "order": [0.1, 0.1, 0.2],
                         "total": [1.4, 1.2, 2.0]})
    bound = {"cells": [("d1", "r")], "models": ["a"], "column": "pool_psi"}
    assert statistics.pool(pool, bound).values == pytest.approx([0.03])
    # companions' share of the within-document variance: mean parts 0.2 and 0.1 -> 2/3
    assert statistics.pool(pool, {**bound, "column": "companion_coupling"}).values == pytest.approx([2 / 3])
    residual = {**bound, "column": "residual_vs_reference", "versus": [{"models": ["b"]}]}
    assert statistics.pool(pool, residual).values == pytest.approx([0.1 / 0.2])
    samples = pl.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 2, "shuffle": [0, 0, 1, 1, 0, 0],
                            "input_position": [1, 2, 1, 2, 1, 2], "doc_id": list("abbaab")})
    assert statistics.propensity_lists(samples, {}).values == [3.0]
    listwise = pl.DataFrame({"query_id": ["q1", "q1", "q2"]})
    assert statistics.listwise_size(listwise, {"what": "instances"}).values == [3.0]
    assert statistics.listwise_size(listwise, {"what": "queries"}).values == [2.0]


def test_bounds_hold_or_differ_with_the_signed_gap():
    at_least = reproduction.Expected(id="g", paper="p", where="w", statistic="rerank_gain", condition={}, value=10,
                                     why="", claim="at_least", scale=100)
    assert reproduction.row(at_least, statistics.Measured([0.12]))["mark"] == reproduction.OK
    low = reproduction.row(at_least, statistics.Measured([0.08]))
    assert low["mark"] == reproduction.DIFFERS and low["gap"] == pytest.approx(-2.0)
    at_most = reproduction.Expected(id="s", paper="p", where="w", statistic="stability_spread", condition={},
                                    value=0.010, why="", claim="at_most")
    assert reproduction.row(at_most, statistics.Measured([0.02]))["mark"] == reproduction.DIFFERS
    assert at_least.stated() == "≥ 10" and at_most.stated() == "≤ 0.01"


# ---- matching by content --------------------------------------------------------------------------------

def _bindings(path: str | Path) -> dict:
    cfg = pbconfig.load(path, files=False)
    return json.loads(reproduction.plan(cfg).bindings)


def test_the_default_run_compares_no_tiny_model_with_a_paper(shared_data):
    bound = {k for k, v in _bindings(REPO / "config" / "config.yaml").items() if "bound" in v}
    assert bound == {"anserini-bm25-dl19"}  # the imported DL19 BM25 run; toys and tiny models: not run


def test_presets_bind_their_papers_figures():
    debiasfirst = _bindings(REPO / "config" / "paper" / "debiasfirst.yaml")
    assert all("bound" in b for k, b in debiasfirst.items() if k.startswith("df-"))
    ocsft = _bindings(REPO / "config" / "paper" / "ocsft.yaml")
    # Figure 3 pools 11 dense bases, which the paper does not name: not bound on a preset of one base
    assert all("bound" in b for k, b in ocsft.items() if k.startswith("ocsft-") and k != "ocsft-fig3-pooled-gain")
    assert ocsft["ocsft-fig3-pooled-gain"]["reason"].startswith("the figure pools 11 base models' ocsft; this run has 1")
    capcal = _bindings(REPO / "config" / "paper" / "capcal.yaml")
    assert all("bound" in b for k, b in capcal.items() if k.startswith("capcal-"))
    # seeds of one variant, and the variant that has the results the figure reads
    assert ocsft["ocsft-t1-tau"]["bound"]["models"] == ["ocsft-s1", "ocsft-s2", "ocsft-s3"]
    assert ocsft["ocsft-qa-flip"]["bound"]["models"] == ["ocsft_qa-s1"]


def test_a_collection_is_matched_by_its_qrels_not_its_name(shared_data, tmp_path):
    qrels = shared_data / "trec-dl-2019" / "2019qrels-pass.txt"
    run = shared_data / "trec-dl-2019" / "rank_llm" / "retrieve_results" / "BM25" / "retrieve_results_dl19.json"
    cfg = {"datasets": {"my-set": {"source": "imported", "qrels": str(qrels), "runs": {"bm25": {"path": str(run)}}},
                        "other": {"source": "imported", "qrels": str(tmp_path / "q.txt"), "runs": {"bm25": {"path": str(run)}}}},
           "retrievers": {}}
    (tmp_path / "q.txt").write_text("1 0 d 1\n")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    bindings = _bindings(path)
    assert bindings["anserini-bm25-dl19"]["bound"]["cells"] == [["my-set", "imported:bm25"]]
    assert bindings["anserini-bm25-dl20"]["reason"] == "no dataset of this run is dl20"


def test_a_perturbed_result_turns_its_row_into_differs(shared_data, tmp_path):
    """The matrix of a run whose DL19 BM25 metrics are nudged by 0.01: that row differs, with its gap."""
    bindings = _bindings(REPO / "config" / "config.yaml")
    path = bindings["anserini-bm25-dl19"]["files"][0]
    frame = pl.DataFrame({"system": ["imported:bm25"] * 2, "dataset": ["dl19"] * 2, "query_id": ["1", "2"],
                          "measure": ["nDCG@10"] * 2, "value": [0.5058, 0.5058]})

    def read(p, kind):
        assert p == path and kind == "metrics"
        return frame

    expected = [str(p) for p in EXPECTED]
    rows = {r["id"]: r for r in reproduction.compute(expected, json.dumps(bindings), read)}
    assert rows["anserini-bm25-dl19"]["mark"] == reproduction.OK
    frame = frame.with_columns(pl.col("value") + 0.01)
    rows = {r["id"]: r for r in reproduction.compute(expected, json.dumps(bindings), read)}
    assert rows["anserini-bm25-dl19"]["mark"] == reproduction.DIFFERS
    assert rows["anserini-bm25-dl19"]["gap"] == pytest.approx(0.01)
    assert reproduction.summary(list(rows.values())) == f"reproduction: 0 OK, 1 differ, {len(rows) - 1} not run"
