"""The papers' directional claims (posbias.reproduction.claims): known answers on hand-made per-query metrics."""

from __future__ import annotations

import math

import polars as pl
import pytest

from posbias.reproduction import claims

QUERIES = [f"q{i}" for i in range(8)]


def frame(values: dict[str, list[float]], debias: str = "none") -> pl.DataFrame:
    """Per-query metrics rows: order → one nDCG@10 per query (plus a measure the claims must ignore)."""
    rows = []
    for order, per_query in values.items():
        for query, value in zip(QUERIES, per_query):
            rows += [{"model": "m", "dataset": "d", "retriever": "r", "order": order, "debias": debias,
                      "query_id": query, "measure": "nDCG@10", "value": value},
                     {"model": "m", "dataset": "d", "retriever": "r", "order": order, "debias": debias,
                      "query_id": query, "measure": "R@100", "value": -value}]
    return pl.DataFrame(rows)


def by_id(rows):
    return {r["claim"]: r for r in rows}


def test_the_one_sided_wilcoxon_has_its_exact_known_answer():
    # six positive differences: the exact null distribution puts 1 of 2^6 sign patterns at the maximum
    assert claims.wilcoxon_greater([1, 2, 3, 4, 5, 6], [0] * 6) == pytest.approx(1 / 64)
    assert claims.wilcoxon_greater([0] * 6, [1, 2, 3, 4, 5, 6]) == pytest.approx(1.0)
    assert claims.wilcoxon_greater([1, 1], [1, 1]) == 1.0  # no difference at all: no evidence


def test_a_real_drop_under_shuffles_holds_and_a_rise_fails_the_other_way():
    original = [0.9, 0.8, 0.7, 0.9, 0.6, 0.8, 0.7, 0.9]
    shuffled = [[v - 0.2 - 0.01 * i for i, v in enumerate(original)], [v - 0.3 for v in original]]
    holds = claims.check(claims.CLAIMS[0], {"none": frame(
        {"original": original, "shuffled-0": shuffled[0], "shuffled-1": shuffled[1]})})
    assert holds["mark"] == claims.HOLDS and holds["queries"] == 8
    assert holds["effect"] == pytest.approx(0.25 + 0.01 * 3.5 / 2)  # mean of the paired drops
    assert holds["p"] == pytest.approx(1 / 256)  # eight positive differences, all distinct
    rises = claims.check(claims.CLAIMS[0], {"none": frame({"original": shuffled[1], "shuffled-0": original})})
    assert rises["mark"] == claims.FAILS and rises["note"] == "the other way" and rises["effect"] < 0


def test_claims_without_the_orders_or_methods_they_need_are_not_run():
    only_original = {"none": frame({"original": [0.5] * 8})}
    rows = by_id(claims.evaluate({("m", "d", "r"): only_original}))
    assert {r["mark"] for r in rows.values()} == {claims.NOT_RUN}
    assert rows["shuffling-lowers-quality"]["note"] == "no shuffled order"
    assert rows["late-positions-lose"]["note"] == "fewer than two position orders"
    assert rows["capcal-lifts-quality"]["note"] == "no CapCal (the paper's α)"
    assert math.isnan(rows["permsc-beats-one-list"]["p"])


def test_late_positions_compare_the_first_and_last_measured_positions():
    values = {"position-1": [1.0] * 8, "position-10": [0.1] * 8, "position-20": [0.5, 0.4, 0.3, 0.2, 0.6, 0.5, 0.4,
                                                                                0.3]}
    row = claims.check(claims.CLAIMS[1], {"none": frame(values)})
    assert row["mark"] == claims.HOLDS and row["compared"] == "relevant passage at input position 1 vs 20"
    assert row["effect"] == pytest.approx(1 - sum(values["position-20"]) / 8)


def test_permsc_takes_its_largest_k_against_one_list_and_capcal_both_presented_orders():
    plain = frame({"original": [0.5] * 8, "shuffled-0": [0.3] * 8, "shuffled-1": [0.4] * 8, "position-1": [0] * 8})
    better = [0.5, 0.6, 0.7, 0.45, 0.55, 0.65, 0.5, 0.6]
    metrics = {"none": plain, "permsc@2": frame({"original": [0.0] * 8}, "permsc@2"),
               "permsc@3": frame({"original": better}, "permsc@3"),
               "capcal": frame({"original": [0.5] * 8, "shuffled-0": [0.3] * 8, "shuffled-1": [0.4] * 8,
                                "position-1": [1.0] * 8}, "capcal")}
    rows = by_id(claims.evaluate({("m", "d", "r"): metrics}))
    permsc = rows["permsc-beats-one-list"]
    assert permsc["mark"] == claims.HOLDS and permsc["compared"].startswith("permsc@3 vs one")
    assert permsc["effect"] == pytest.approx(sum(better) / 8 - 0.35)
    capcal = rows["capcal-lifts-quality"]  # identical on the presented orders; position orders do not count
    assert capcal["mark"] == claims.FAILS and capcal["note"] == "no difference" and capcal["effect"] == 0


def test_the_table_lists_tested_claims_with_their_quotes_and_counts_the_rest():
    rows = claims.evaluate({("m", "d", "r"): {"none": frame({"original": [0.9] * 8, "shuffled-0": [0.1] * 8})}})
    table = claims.table(rows)
    assert table.view["claim"].to_list() == ["shuffling-lowers-quality"]
    assert "claims: 1 hold, 0 fail, 3 not run" in table.notes
    assert "“Unlike the baselines, whose performance reduces with randomized passage order”" in table.notes
    assert table.data.height == 4


def test_a_right_direction_too_few_queries_cannot_show_fails_and_says_why():
    """Three queries, all in the claimed direction: the exact one-sided test cannot go below 1/8."""
    metrics = {"none": frame({"original": [0.9, 0.8, 0.7] + [0.5] * 5, "shuffled-0": [0.1, 0.2, 0.3] + [0.5] * 5})}
    row = claims.check(claims.CLAIMS[0], metrics)
    assert row["p"] == pytest.approx(1 / 8) and row["mark"] == claims.FAILS
    assert row["note"] == "not significant (the smallest p 3 queries that differ allow: 0.125)"


def test_every_claim_a_debiasing_method_names_is_a_claim():
    from posbias import debias

    named = {m.claim for m in debias.DEBIAS_METHODS.values() if m.claim}
    assert named == {"capcal-lifts-quality", "permsc-beats-one-list"} <= {c.id for c in claims.CLAIMS}
