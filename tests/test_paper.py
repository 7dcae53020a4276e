"""Paper tables: Holm correction, paired tests and the table builders on hand-made metrics."""

import math

import polars as pl
import pytest

from posbias import paper


def test_holm_known_answers():
    # p sorted: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04); monotone step-down
    assert paper.holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert paper.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert paper.holm([0.03, math.nan, 0.01])[2] == pytest.approx(0.02)
    assert math.isnan(paper.holm([0.03, math.nan])[1])


def test_paired_pvalue():
    a = [0.1 * i for i in range(12)]
    b = [0.1 * i + (0.5 if i % 3 else -0.2) for i in range(12)]
    # symmetric in its arguments
    assert paper.paired_pvalue(pl.Series(a).to_numpy(), pl.Series(b).to_numpy()) == pytest.approx(
        paper.paired_pvalue(pl.Series(b).to_numpy(), pl.Series(a).to_numpy()))
    assert math.isnan(paper.paired_pvalue(pl.Series(a).to_numpy(), pl.Series(a).to_numpy()))
    assert paper.paired_pvalue(pl.Series(a).to_numpy(), (pl.Series(a) + 0.5).to_numpy()) < 0.01


def _metrics(model, values_by_order, debias="none", dataset="d", retriever="bm25"):
    rows = []
    for order, values in values_by_order.items():
        rows += [(model, dataset, retriever, order, debias, f"q{i}", "nDCG@10", v) for i, v in enumerate(values)]
    return pl.DataFrame(rows, schema=["model", "dataset", "retriever", "order", "debias", "query_id", "measure",
                                      "value"], orient="row")


def test_original_vs_shuffled_marks_a_real_drop_only():
    n = 20
    biased = _metrics("biased", {"original": [0.9] * n, "shuffled-0": [0.3 + 0.01 * i for i in range(n)],
                                 "shuffled-1": [0.35 + 0.01 * i for i in range(n)]})
    robust = _metrics("robust", {"original": [0.5 + 0.01 * i for i in range(n)],
                                 "shuffled-0": [0.5 + 0.01 * i for i in range(n)],
                                 "shuffled-1": [0.5 + 0.01 * i for i in range(n)]})
    table = paper.original_vs_shuffled(pl.concat([biased, robust]))
    data = {r["model"]: r for r in table.data.iter_rows(named=True)}
    assert data["biased"]["ndcg10_original"] == pytest.approx(0.9)
    assert data["biased"]["ndcg10_shuffled"] == pytest.approx(0.42, abs=1e-9)
    assert data["biased"]["p_holm"] < 0.001 and math.isnan(data["robust"]["p_holm"])
    view = {r["model"]: r for r in table.view.iter_rows(named=True)}
    assert view["biased"]["d (bm25)"].endswith("†") and not view["robust"]["d (bm25)"].endswith("†")
    assert "Wilcoxon" in table.notes and "Holm" in table.notes


def test_write_gives_markdown_csv_and_booktabs(tmp_path):
    table = paper.Table(pl.DataFrame({"model": ["a_b"], "value": [0.5]}),
                        pl.DataFrame({"model": ["a_b"], "nDCG@10": ["0.5000†"]}), "Notes with α.")
    md, csv, tex = paper.write(table, tmp_path / "t", "A title")
    assert md.read_text().startswith("# A title") and "| a_b | 0.5000† |" in md.read_text()
    assert pl.read_csv(csv)["value"][0] == 0.5
    text = tex.read_text()
    assert "\\toprule" in text and "\\bottomrule" in text and "a\\_b" in text and "\\dag" in text
