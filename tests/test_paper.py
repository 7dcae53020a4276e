"""Paper tables: Holm correction, paired tests and the table builders on hand-made metrics."""

import math
import re

import polars as pl
import pytest

from posbias import paper
from posbias.paper.inference_vs_training import inference_vs_training_figure
from posbias.paper.seeds import seed_curves
from tests.conftest import REPO


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


TRAINING = {"m-s1": {"variant": "m", "seed": 1, "method": "first", "aug": "noaug"},
            "m-s2": {"variant": "m", "seed": 2, "method": "first", "aug": "noaug"}}


def test_seeds_are_one_row_with_mean_and_sd():
    n = 12
    seed1 = _metrics("m-s1", {"original": [0.8] * n, "shuffled-0": [0.4] * n, "shuffled-1": [0.6] * n})
    seed2 = _metrics("m-s2", {"original": [0.6] * n, "shuffled-0": [0.2] * n, "shuffled-1": [0.4] * n})
    table = paper.original_vs_shuffled(pl.concat([seed1, seed2]), TRAINING)
    row = table.data.row(0, named=True)
    assert table.data.height == 1 and row["model"] == "m" and row["seeds"] == 2 and row["queries"] == n
    assert row["ndcg10_original"] == pytest.approx(0.7) and row["ndcg10_original_sd"] == pytest.approx(0.1414, abs=1e-4)
    assert row["ndcg10_shuffled"] == pytest.approx(0.4) and row["ndcg10_shuffled_sd"] == pytest.approx(0.1414, abs=1e-4)
    assert table.view["d (bm25)"][0].startswith("0.7000 ± 0.1414 / 0.4000 ± 0.1414")
    first_stage = pl.DataFrame({"system": "bm25", "dataset": "d", "query_id": [f"q{i}" for i in range(n)],
                                "measure": "nDCG@10", "value": 0.5})
    table = paper.retrievers(pl.concat([seed1, seed2]), first_stage, TRAINING)
    rows = {r["model"]: r for r in table.data.iter_rows(named=True)}
    assert rows["m"]["seeds"] == 2 and rows["m"]["ndcg10"] == pytest.approx(0.7) and rows["first stage"]["ndcg10"] == 0.5
    assert table.view.filter(pl.col("model") == "m")["d · bm25"][0] == "0.7000 ± 0.1414"
    pointwise = {**TRAINING, "o": {"method": "ocsft", "aug": "noaug"}}
    summaries = pl.concat([_summary(m, 0.7, 0.4) for m in ("m-s1", "m-s2", "o")]).with_columns(ndcg10_shuffled_sd=0.1)
    assert set(paper.ablations(summaries, _curve("m-s1", [1.0, 0.5]), pointwise).data["model"]) == {"m"}


def _curve(model, values, debias="none"):
    return pl.DataFrame({"model": model, "dataset": "d", "retriever": "bm25", "debias": debias,
                         "position": list(range(1, len(values) + 1)), "queries": 10, "ndcg10": 0.5,
                         "target_ndcg10": values, "target_mrr": values, "target_rank": 1.0,
                         **{f"target_{m}_{end}": [min(max(v + d, 0.0), 1.0) for v in values] for m in ("ndcg10", "mrr")
                            for end, d in (("lo", -0.05), ("hi", 0.05))}})


def _summary(model, original, shuffled, debias="none"):
    return pl.DataFrame({"model": [model], "dataset": ["d"], "retriever": ["bm25"], "debias": [debias],
                         "ndcg10_original": [original], "ndcg10_shuffled_mean": [shuffled]})


def test_position_bias_spread_over_seeds_and_single_models():
    curves = pl.concat([_curve("m-s1", [1.0, 0.9, 0.0]), _curve("m-s2", [1.0, 0.5, 0.2]),
                        _curve("flat", [0.7, 0.7, 0.7]), _curve("flat", [0.1, 0.9, 0.1], debias="capcal")])
    # flat's CapCal reading has a curve and a summary: a row of its own, after the plain one; permsc@3 has no curve
    summaries = pl.concat([_summary("flat", 0.6, 0.6, "capcal"), _summary("m-s1", 0.9, 0.5), _summary("m-s2", 0.8, 0.3),
                           _summary("flat", 0.7, 0.7), _summary("flat", 0.7, 0.7, "permsc@3")])
    table = paper.position_bias(summaries, curves, TRAINING)
    assert table.data.select("model", "debias").rows() == [("m", "none"), ("flat", "none"), ("flat", "capcal")]
    assert table.data.row(2, named=True)["spread"] == pytest.approx(0.8)
    rows = {r["model"]: r for r in table.data.filter(pl.col("debias") == "none").iter_rows(named=True)}
    assert rows["m"]["spread"] == pytest.approx(0.9) and rows["m"]["spread_sd"] == pytest.approx(math.sqrt(0.02))
    assert rows["m"]["ndcg10_shuffled"] == pytest.approx(0.4) and rows["m"]["positions"] == 3
    assert rows["flat"]["spread"] == 0 and math.isnan(rows["flat"]["spread_sd"]) and rows["flat"]["seeds"] == 1
    view = {r["model"]: r for r in table.view.iter_rows(named=True) if r["method"] == "none"}
    assert view["flat"]["curve spread (nDCG@10)"] == "0.000" and "±" in view["m"]["nDCG@10 shuffled"]


def test_figures_are_written_as_png_and_pdf(tmp_path):
    curves = pl.concat([_curve("m-s1", [1.0, 0.9, 0.0]), _curve("m-s2", [1.0, 0.5, 0.2])])
    orders = {"original": [0.9] * 4, "shuffled-0": [0.5] * 4, "shuffled-1": [0.6] * 4}
    metrics = pl.concat([_metrics(m, orders, debias=d) for m in ("m-s1", "m-s2") for d in ("none", "permsc-window@3")]
                        + [_metrics(m, {"original": [0.7 + 0.1 * (m == "m-s2")] * 4}, debias="permsc@3")
                           for m in ("m-s1", "m-s2")])
    for name in paper.names(paper.FIGURES, "paper_figure"):
        paper.draw(name, tmp_path / f"{name}.png", metrics=metrics, curves=curves, training=TRAINING)
        assert (tmp_path / f"{name}.png").stat().st_size > 5_000
        assert (tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    by_k = {(r["method"], r["k"]): r["value"] for r in
            inference_vs_training_figure(metrics, TRAINING, tmp_path / "f5.png").to_dicts()}
    # K = 1: one pass over a shuffled list (mean over shuffles and seeds), the start of both PermSC curves;
    # per-window PermSC on the shuffled orders; list-level PermSC on its one (original) ranking
    assert by_k == pytest.approx({("permsc", 1): 0.55, ("permsc", 3): 0.75, ("permsc-window", 1): 0.55,
                                  ("permsc-window", 3): 0.55})
    # each point's interval is over queries: every query scores the same here, so it is the point itself
    right = inference_vs_training_figure(metrics, TRAINING, tmp_path / "f5.png")
    assert right["lo"].to_list() == pytest.approx(right["value"].to_list()) == right["hi"].to_list()
    spread = metrics.with_columns(value=pl.col("value") + 0.1 * pl.col("query_id").str.slice(-1).cast(pl.Int64) - 0.15)
    wide = inference_vs_training_figure(spread, TRAINING, tmp_path / "f5-spread.png").row(0, named=True)
    assert wide["lo"] < wide["value"] < wide["hi"]
    with pytest.raises(ValueError, match="figure 'nope' is unknown; use one of: position_curve"):
        paper.draw("nope", tmp_path / "x.png", metrics=metrics, curves=curves, training=TRAINING)
    seeds = seed_curves(curves, TRAINING)
    assert seeds["seeds"].to_list() == [2, 2, 2] and seeds["target_ndcg10"].to_list() == pytest.approx([1.0, 0.7, 0.1])


def _grid():
    """Two seeds of one model and a second model on two datasets × two retrievers, with CapCal: every
    paper table's input at once."""
    training = {"a-s1": {"variant": "a", "seed": 1, "method": "first", "aug": "noaug"},
                "a-s2": {"variant": "a", "seed": 2, "method": "first", "aug": "noaug"},
                "b": {"method": "debiasfirst", "aug": "posaug"}}
    metrics, summaries, curves, first_stage = [], [], [], []
    for i, (model, dataset, retriever) in enumerate(
            (m, d, r) for m in training for d in ("d1", "d2") for r in ("bm25", "splade")):
        for method in ("none", "capcal", "capcal@na-5") if model == "b" else ("none",):
            base = 0.3 + 0.01 * i + (0.05 if method.startswith("capcal") else 0.0)
            orders = {"original": [base + 0.02 * q for q in range(8)],
                      "shuffled-0": [base - 0.1 + 0.01 * q for q in range(8)],
                      "shuffled-1": [base - 0.05 + 0.015 * q for q in range(8)]}
            metrics.append(_metrics(model, orders, method, dataset, retriever))
            summaries.append(pl.DataFrame({"model": [model], "dataset": [dataset], "retriever": [retriever],
                                           "debias": [method], "ndcg10_original": [base],
                                           "ndcg10_shuffled_mean": [base - 0.07], "ndcg10_shuffled_sd": [0.02],
                                           "calls_per_query": [9.0], "seconds_per_query": [0.1]}))
            curves.append(_curve(model, [base + 0.1, base, base - 0.1], method).with_columns(
                dataset=pl.lit(dataset), retriever=pl.lit(retriever)))
        first_stage.append(pl.DataFrame({"system": retriever, "dataset": dataset, "query_id": [f"q{q}" for q in range(8)],
                                         "measure": "nDCG@10", "value": 0.2}))
    return {"metrics": pl.concat(metrics), "summaries": pl.concat(summaries), "curves": pl.concat(curves),
            "first_stage": pl.concat(first_stage).unique(maintain_order=True), "training": training, "reference": "b"}


# The view columns that name a row rather than hold a result cell, per table.
LABEL_COLUMNS = {"original_vs_shuffled": {"model", "average"}, "retrievers": {"model"}, "ablations": {"objective"},
                 "versus_baselines": {"model"}}


@pytest.mark.parametrize("name", paper.names(paper.TABLES, "paper_table"))
def test_markdown_and_latex_hold_every_cell_of_the_csv(tmp_path, name):
    """One result cell per CSV row (a long table: one view row per CSV row), and Markdown and LaTeX show
    every view row: no cell is dropped by a pivot, whatever the grid's shape."""
    table = paper.build(name, **_grid())
    md, csv, tex = paper.write(table, tmp_path / name, name)
    data = pl.read_csv(csv)
    assert data.height > 0
    if name in LABEL_COLUMNS:
        cells = [v for c in table.view.columns if c not in LABEL_COLUMNS[name] for v in table.view[c] if v != "–"]
        assert len(cells) == data.height, (name, table.view)
    else:
        cells = [v for c in table.view.columns for v in table.view[c]]
        assert table.view.height == data.height
    text = md.read_text()
    assert all(f" {cell} |" in text for cell in cells)
    rows = [line for line in tex.read_text().splitlines() if line.rstrip().endswith("\\\\")]
    assert len(rows) == table.view.height + 1  # the header and every view row
    # what pdflatex typesets with booktabs, amssymb and CJKutf8: ASCII, Chinese only inside a CJK environment,
    # the notes under the table, not in the caption
    latex = tex.read_text()
    outside_cjk = re.sub(r"\\begin\{CJK\}\{UTF8\}\{gbsn\}.*?\\end\{CJK\}", "", latex)
    assert outside_cjk.isascii(), sorted({ch for ch in outside_cjk if not ch.isascii()})
    caption = next(line for line in latex.splitlines() if line.startswith("\\caption{"))
    assert caption == "\\caption{" + name.replace("_", "\\_") + "}" and "\\footnotesize" in latex


def test_capcal_table_has_a_row_per_variant_and_permsc_as_the_comparison():
    """One row per (experiment, method): each CapCal placeholder variant and PermSC@K against no
    debiasing; PermSC has no shuffled column (it aggregates the shuffled lists); experiments without
    CapCal are left out."""
    n = 12
    base = [0.4 + 0.01 * i for i in range(n)]
    parts, summaries = [], []
    for model, methods in (("m", ("none", "capcal", "capcal@na-50", "permsc@10")), ("other", ("none", "permsc@10"))):
        for method in methods:
            lift = {"none": 0.0, "capcal": 0.1, "capcal@na-50": 0.0, "permsc@10": 0.2}[method]
            orders = {"original": [v + lift for v in base]}
            if not method.startswith("permsc"):
                orders["shuffled-0"] = [v - 0.1 + lift for v in base]
            parts.append(_metrics(model, orders, method))
            alpha = {"capcal": (0.6, 0.2, 0.25), "capcal@na-50": (1.0, 0.0, math.nan)}.get(method, (math.nan,) * 3)
            summaries.append(pl.DataFrame({"model": [model], "dataset": ["d"], "retriever": ["bm25"],
                                           "debias": [method], "calls_per_query": [9.0 * (10 if "permsc" in method else 1)],
                                           "seconds_per_query": [0.1], "capcal_alpha_mean": [alpha[0]],
                                           "capcal_alpha_sd": [alpha[1]], "capcal_at_cap": [alpha[2]]}))
    table = paper.capcal(pl.concat(parts), pl.concat(summaries))
    rows = {r["method"]: r for r in table.data.iter_rows(named=True)}
    assert set(table.data["model"]) == {"m"} and sorted(rows) == ["capcal", "capcal@na-50", "permsc@10"]
    assert rows["capcal"]["ndcg10_original_method"] == pytest.approx(rows["capcal"]["ndcg10_original"] + 0.1)
    assert rows["capcal@na-50"]["ndcg10_shuffled_method"] == pytest.approx(rows["capcal@na-50"]["ndcg10_shuffled"])
    assert math.isnan(rows["permsc@10"]["ndcg10_shuffled_method"]) and rows["permsc@10"]["calls_per_query_method"] == 90
    assert rows["capcal"]["p_holm"] < 0.05 and "capcal@na-50: CapCal (content-agnostic calibration), variant na-50" in table.notes
    # α per method: mean ± sd, and the adaptive α's share at its cap (– for a fixed α and for PermSC)
    view = {r["method"]: r for r in table.view.iter_rows(named=True)}
    assert (view["capcal"]["α"], view["capcal"]["α at cap"]) == ("0.600 ± 0.200", "0.250")
    assert view["capcal@na-50"]["α at cap"] == "–" and view["permsc@10"]["α"] == "–"


def test_versus_baselines_tests_each_baseline_against_the_reference_with_holm():
    n = 20
    ref = [0.6 + 0.01 * i for i in range(n)]
    metrics = pl.concat([
        _metrics("ref-s1", {"original": ref, "shuffled-0": ref}), _metrics("ref-s2", {"original": ref, "shuffled-0": ref}),
        _metrics("worse", {"original": [v - 0.2 - 0.001 * i for i, v in enumerate(ref)], "shuffled-0": ref}),
        _metrics("same", {"original": ref, "shuffled-0": ref})])
    training = {"ref-s1": {"variant": "ref"}, "ref-s2": {"variant": "ref"}}
    table = paper.versus_baselines(metrics, training, "ref")
    rows = {(r["model"], r["condition"]): r for r in table.data.iter_rows(named=True)}
    assert rows[("ref", "original")]["seeds"] == 2 and math.isnan(rows[("ref", "original")]["p"])
    assert rows[("worse", "original")]["p_holm"] < 0.001 and rows[("worse", "original")]["paired_queries"] == n
    assert math.isnan(rows[("same", "original")]["p"]) and math.isnan(rows[("worse", "shuffled")]["p"])
    # Holm over the baselines of one dataset and condition; "same" has no test (all differences 0), so m = 1
    assert rows[("worse", "original")]["p_holm"] == pytest.approx(min(1.0, rows[("worse", "original")]["p"] * 1))
    view = {r["model"]: r for r in table.view.iter_rows(named=True)}
    assert view["worse"]["d · bm25 · original"].endswith("†") and not view["same"]["d · bm25 · original"].endswith("†")
    assert "no reference" in paper.versus_baselines(metrics, training, None).notes.lower()


def _stability_rows(model, dataset, tau, jaccard, n=20):
    """A plain scorer's (K = 1) stability row and its per-query rows: per-query τ-PSI ``tau + 0.01 q``."""
    per_query = pl.DataFrame({"model": model, "dataset": dataset, "retriever": "bm25", "k": 1, "budget": "fixed",
                              "query_id": [f"q{q}" for q in range(n)], "ndcg10": 0.5,
                              "tau_psi": [tau + 0.01 * q for q in range(n)], "jaccard": jaccard, "tie_rate": 0.0,
                              "dispersion": 0.2, "top10_instability": 0.1})
    row = pl.DataFrame({"model": model, "dataset": dataset, "retriever": "bm25", "k": 1, "budget": "fixed",
                        "presentations": 8, "queries": n, "ndcg10_canonical": 0.5, "ndcg10": 0.5,
                        "tau_psi": per_query["tau_psi"].mean(), "jaccard": jaccard, "threshold": 0.5, "f1": 0.7,
                        "calls_per_query": 1.0, "tokens_per_query": 100.0, "draws": 1.0, "tie_rate": 0.0,
                        "dispersion": 0.2, "top10_instability": 0.1})
    return row, per_query.with_columns(pl.col("k").cast(pl.Int32))


def test_ocsft_table_averages_seeds_and_marks_holm_significant_differences():
    """Two seeds per variant become one row (mean ± sd); a baseline worse on every query is marked †
    against OC-SFT, a baseline equal to it is not; several datasets add a mean-over-datasets row."""
    parts = [_stability_rows(m, d, tau, jac) for d in ("d1", "d2") for m, tau, jac in
             (("oc-s1", 0.10, 0.9), ("oc-s2", 0.12, 0.8), ("so-s1", 0.30, 0.5), ("so-s2", 0.32, 0.5),
              ("same", 0.11, 0.85))]
    table = pl.concat([p[0] for p in parts]).with_columns(pl.col("k").cast(pl.Int32))
    per_query = pl.concat([p[1] for p in parts])
    variants = {"oc-s1": "oc", "oc-s2": "oc", "so-s1": "so", "so-s2": "so"}
    result = paper.stability(table, per_query, {"oc-s1": 10.0, "oc-s2": 20.0}, variants, "oc")
    view = {(r["variant"], r["dataset"]): r for r in result.view.iter_rows(named=True)}
    oc, so, same = view[("oc", "d1 · bm25")], view[("so", "d1 · bm25")], view[("same", "d1 · bm25")]
    assert oc["seeds"] == "2" and oc["retention Jaccard"] == "0.850 ± 0.071" and oc["training s"] == "15"
    assert so["τ-PSI"].endswith("†") and not oc["τ-PSI"].endswith("†") and not same["τ-PSI"].endswith("†")
    assert not so["nDCG@10 shuffled"].endswith("†")  # equal quality: no test to pass
    assert ("so", "mean over datasets") in view
    tests = result.data.filter((pl.col("variant") == "so") & (pl.col("dataset") == "d1"))
    assert tests["p_holm_tau_psi"][0] < 0.05
    # our construction of a baseline the paper names without its form is printed with its label (0.17.0 printed
    # the bare name, so a reader took it for the paper's DebiasFirst)
    settings = {"so": {"method": "debiasfirst_pointwise"}, "oc": {"method": "ocsft"}}
    labelled = paper.stability(table, per_query, {}, variants, "oc", settings=settings).view["variant"].to_list()
    assert "so [pointwise DebiasFirst (ours: slot IPS)]" in labelled and "oc" in labelled


def test_matched_retention_reads_each_variant_at_its_threshold_and_at_the_matched_rate():
    """A variant whose retention gain over the reference shrinks at the matched rate: both readings, their
    differences from the reference (known answers) and a † where the paired test over queries holds."""
    parts = []
    for model, jaccard, matched, kept in (("oc-s1", 0.9, 0.80, 0.30), ("oc-s2", 0.8, 0.70, 0.20),
                                          ("so", 0.5, 0.65, 0.10), ("same", 0.85, 0.75, 0.25)):
        row, per_query = _stability_rows(model, "d1", 0.1, jaccard)
        parts.append((row.with_columns(retained=pl.lit(kept), matched_rate=pl.lit(0.15),
                                       jaccard_matched=pl.lit(matched)),
                      per_query.with_columns(jaccard_matched=pl.lit(matched))))
    table = pl.concat([p[0] for p in parts]).with_columns(pl.col("k").cast(pl.Int32))
    per_query = pl.concat([p[1] for p in parts])
    result = paper.build("matched_retention", stability=table, stability_queries=per_query,
                         variants={"oc-s1": "oc", "oc-s2": "oc"}, reference="oc", dev=None)
    data = {r["variant"]: r for r in result.data.iter_rows(named=True)}
    assert data["oc"]["jaccard"] == pytest.approx(0.85) and data["oc"]["jaccard_matched"] == pytest.approx(0.75)
    assert data["oc"]["retained"] == pytest.approx(0.25) and data["oc"]["jaccard_gain"] == 0.0
    assert data["so"]["jaccard_gain"] == pytest.approx(-0.35) and data["so"]["jaccard_matched_gain"] == pytest.approx(-0.10)
    view = {r["variant"]: r for r in result.view.iter_rows(named=True)}
    assert view["so"]["Δ Jaccard at τ*"] == "-0.350†" and view["so"]["Δ Jaccard at matched rate"] == "-0.100†"
    assert view["same"]["Δ Jaccard at matched rate"] == "0.000" and view["oc"]["Δ Jaccard at τ*"] == "–"
    assert view["oc"]["matched rate"] == "0.150" and view["oc"]["Jaccard at τ*"] == "0.850 ± 0.071"


def test_ocsft_settings_choose_lambda_on_held_out_quality_only():
    """λ is the best dev nDCG@10 among N = 2 OC-SFT entries and single order, whatever their test
    stability; other settings (N = 4, no anchor) are listed but not candidates."""
    rows = []
    for variant, dev_ndcg, test_psi in (("so", 0.60, 0.40), ("l1", 0.70, 0.35), ("l5", 0.72, 0.30),
                                        ("l20", 0.65, 0.10), ("n4", 0.90, 0.20), ("na", 0.95, 0.25)):
        for dataset, ndcg, psi in (("dev", dev_ndcg, 0.0), ("test", 0.5, test_psi)):
            rows.append(_stability_rows(variant, dataset, psi, 0.8)[0].with_columns(
                ndcg10_canonical=pl.lit(ndcg)))
    table = pl.concat(rows).with_columns(pl.col("k").cast(pl.Int32))
    methods = {"so": ("single_order", 0.0, 1), "l1": ("ocsft", 1.0, 2), "l5": ("ocsft", 5.0, 2),
               "l20": ("ocsft", 20.0, 2), "n4": ("ocsft", 5.0, 4), "na": ("ocsft_no_anchor", 5.0, 2)}
    settings = {v: {"method": m, "lambda": lam, "views": n, "grid": v != "na"} for v, (m, lam, n) in methods.items()}
    result = paper.ocsft_settings(table, {}, settings, "dev")
    chosen = result.data.filter(pl.col("chosen"))["variant"].to_list()
    assert chosen == ["l5"]  # not n4 or na (better dev quality, other settings) nor l20 (most stable)
    assert result.view.height == 6 and "l5 ◀" in result.view["variant"].to_list()
    assert result.data.filter(pl.col("variant") == "l20")["tau_psi"][0] == pytest.approx(0.10 + 0.01 * 9.5)


def test_ocsft_settings_test_on_the_variants_dataset_and_one_cell_without_variants():
    """The test set is the first dataset the variants were scored on (a simulated scorer's dataset may come
    first, as in the default run); with no variant scored the table is one cell saying so, not zero columns
    (which LaTeX cannot typeset)."""
    table = pl.concat([_stability_rows("sim", "dl19", 0.3, 0.8)[0], _stability_rows("oc", "synthetic", 0.2, 0.9)[0]])
    table = table.with_columns(pl.col("k").cast(pl.Int32))
    settings = {"oc": {"method": "ocsft", "lambda": 5.0, "views": 2, "grid": True}}
    result = paper.ocsft_settings(table, {}, settings, None)
    assert result.view["variant"].to_list() == ["oc"] and result.notes.startswith("Test set synthetic;")
    empty = paper.ocsft_settings(table, {}, {}, None)
    assert empty.view.columns == ["OC-SFT settings"] and empty.view.height == 1
    assert empty.view.item().startswith("none: no trained pointwise variant")


def _frontier_inputs():
    """Per-query and row stability of a listwise model over two seeds (plain, CapCal, PermSC@2, PermSC@≤4
    adaptive) and a pointwise scorer (plain, BSC@2) on dataset d; the pointwise one scored q0-q9 only."""
    rows, tables = [], []
    for model, family, debias, k, budget, n, psi, draws, calls in (
            ("lw-s1", "listwise", "none", 1, "fixed", 20, 0.4, 1.0, 2.0),
            ("lw-s2", "listwise", "none", 1, "fixed", 20, 0.2, 1.0, 2.0),
            ("lw-s1", "listwise", "capcal", 1, "fixed", 20, 0.1, 1.0, 4.0),
            ("lw-s1", "listwise", "none", 2, "fixed", 20, 0.05, 2.0, 4.0),
            ("lw-s1", "listwise", "none", 4, "adaptive", 20, 0.05, 2.5, 5.0),
            ("pw", "pointwise", "none", 1, "fixed", 10, 0.3, 1.0, 1.0),
            ("pw", "pointwise", "none", 2, "fixed", 10, 0.2, 2.0, 2.0)):
        rows.append(pl.DataFrame({"model": model, "dataset": "d", "retriever": "bm25", "debias": debias, "family": family,
                                  "k": k, "budget": budget, "query_id": [f"q{q}" for q in range(n)], "ndcg10": 0.5,
                                  "tau_psi": [psi + (0.5 if q >= 10 else 0.0) + 0.001 * q for q in range(n)],
                                  "jaccard": 0.9, "tie_rate": 0.0, "dispersion": 0.1, "top10_instability": 0.2,
                                  "plain_shift": 0.25 if debias == "capcal" else float("nan"), "draws": draws}))
        tables.append({"model": model, "dataset": "d", "retriever": "bm25", "debias": debias, "k": k, "budget": budget,
                       "draws": draws, "calls_per_query": calls, "tokens_per_query": 100 * calls})
    per_query = pl.concat(rows).with_columns(pl.col("k").cast(pl.Int32))
    single = per_query.filter(pl.col("model") == "pw").with_columns(k=pl.lit(3, pl.Int32), tau_psi=float("nan"))
    stability = pl.DataFrame(tables).with_columns(pl.col("k").cast(pl.Int32))
    return pl.concat([per_query, single]), stability


def test_the_frontier_puts_every_method_on_the_queries_every_row_scored_with_its_cost():
    """Rows from both families over their common queries only; seeds averaged into one row with an sd;
    calls and tokens per query are the draws × one draw's cost; the adaptive row is labelled as such."""
    per_query, stability = _frontier_inputs()
    result = paper.frontier(per_query, stability, {"lw-s1": "lw", "lw-s2": "lw"}, [])
    got = {(r["variant"], r["method"]): r for r in result.data.iter_rows(named=True)}
    # bsc@3 had one presentation (τ-PSI NaN): no row
    assert set(got) == {("lw", "none"), ("lw", "capcal"), ("lw", "permsc@2"), ("lw", "permsc@≤4 adaptive"),
                        ("pw", "none"), ("pw", "bsc@2")}
    assert all(r["queries"] == 10 for r in got.values())  # q10-q19 were not scored by the pointwise scorer
    assert got[("lw", "none")]["tau_psi"] == pytest.approx(0.3045) and got[("lw", "none")]["seeds"] == 2
    assert got[("lw", "none")]["tau_psi_sd"] == pytest.approx(0.1414, abs=1e-4)
    assert got[("lw", "permsc@≤4 adaptive")]["calls"] == pytest.approx(5.0)
    assert got[("lw", "permsc@≤4 adaptive")]["tokens"] == pytest.approx(500.0)
    assert got[("lw", "capcal")]["plain_shift"] == pytest.approx(0.25) and math.isnan(got[("lw", "none")]["plain_shift"])
    shifts = {(r["model"], r["method"]): r["shift from plain"] for r in result.view.iter_rows(named=True)}
    assert shifts[("lw", "capcal")].startswith("0.250") and shifts[("lw", "none")] == "–"
    assert result.data["calls"].to_list() == sorted(result.data["calls"].to_list())  # cheapest first


def test_no_figure_lets_noise_fill_a_panel_or_draws_an_empty_one(tmp_path, monkeypatch):
    """What the published Grades study drew: τ-PSI axes 0.0004 high (two models' equal values filling the panel),
    K axes of 0.95 … 1.05 around K = 1 points, a legend naming adaptive budgets the run has not, and PermSC's
    panel empty in a run without PermSC. Each figure's axes are read before it is saved."""
    import pyarrow as pa

    from posbias import schemas
    from posbias.paper import bsc_curve, inference_vs_training
    from posbias.paper.writers import min_y_span, pyplot

    fig, ax = pyplot().subplots()
    ax.plot([1, 2], [0.4897, 0.4901])
    min_y_span(ax, 0.05)
    assert ax.get_ylim() == pytest.approx((0.4649, 0.5149))
    ax.set_ylim(0.998, 0.999)
    min_y_span(ax, 0.05)  # a Jaccard near 1: the axis stops at 1
    assert ax.get_ylim() == pytest.approx((0.95, 1.0))
    ax.set_ylim(0.0, 1.0)
    min_y_span(ax, 0.05)  # wide enough already: left alone
    assert ax.get_ylim() == (0.0, 1.0)
    pyplot().close(fig)

    drawn = []
    for module in (bsc_curve, inference_vs_training):
        monkeypatch.setattr(module, "save_figure", lambda figure, path, dpi=120: drawn.append(figure))
    rows = [{"model": m, "dataset": "dl19", "retriever": "bm25", "debias": "none", "family": "pointwise", "k": k,
             "budget": "fixed", "presentations": 3 // k, "ndcg10": 0.38 + 0.001 * k,
             "tau_psi": 0.4899 + 0.0002 * (m == "b") if k == 1 else math.nan,
             "jaccard": 0.998 if k == 1 else math.nan, "draws": float(k)} for m in ("a", "b") for k in (1, 2, 3)]
    stability = pl.from_arrow(pa.Table.from_pylist(rows, schema=schemas.STABILITY))
    bsc_curve.bsc_figure(stability, tmp_path / "bsc.png")
    panels = [a for a in drawn[-1].axes if a.axison]
    assert len(panels) == 3
    for panel in panels:
        low, high = panel.get_ylim()
        assert high - low >= 0.05 - 1e-12 and panel.get_xlim() == (0.5, 3.5)
    legend = drawn[-1].axes[-1].get_legend()
    assert legend.get_title().get_text() == ""  # no adaptive row: no word of one
    assert "need two presentations" in drawn[-1].get_suptitle()

    no_permsc = pl.concat([_metrics(m, {"original": [0.9] * 4, "shuffled-0": [0.5] * 4, "shuffled-1": [0.6] * 4})
                           for m in ("m-s1", "m-s2")])
    assert inference_vs_training_figure(no_permsc, TRAINING, tmp_path / "f5.png").is_empty()
    assert len(drawn[-1].axes) == 1  # the per-seed panel alone
    with_permsc = pl.concat([no_permsc, _metrics("m-s1", {"original": [0.7] * 4}, debias="permsc@2")])
    inference_vs_training_figure(with_permsc, TRAINING, tmp_path / "f5.png")
    assert len(drawn[-1].axes) == 2


def test_pareto_front_known_answers():
    from posbias.paper.frontier import pareto

    points = [(1.0, 0.5), (2.0, 0.3), (2.0, 0.4), (4.0, 0.3), (8.0, 0.1), (1.0, float("nan"))]
    assert pareto(points, ("min", "min")) == [True, True, False, False, True, False]
    assert pareto([(0.7, 0.2), (0.6, 0.1), (0.5, 0.3)], ("max", "min")) == [True, True, False]
    assert pareto([(1.0, 1.0), (1.0, 1.0)], ("min", "min")) == [True, True]  # ties dominate neither


def test_the_frontier_marks_its_fronts_and_tests_each_row_against_the_reference(tmp_path):
    """The cheapest stable rows are on the cost front; rows steadier than the reference on every query
    carry † after Holm's correction; the figure is written."""
    per_query, stability = _frontier_inputs()
    result = paper.frontier(per_query, stability, {"lw-s1": "lw", "lw-s2": "lw"}, ["absent", "pw"])
    got = {(r["variant"], r["method"]): r for r in result.data.iter_rows(named=True)}
    assert got[("pw", "none")]["cost_front"]  # 1 call: the cheapest
    assert got[("lw", "permsc@2")]["cost_front"] and not got[("lw", "permsc@≤4 adaptive")]["cost_front"]
    assert not got[("lw", "none")]["cost_front"]  # pw is cheaper, lw-none is not steadier than capcal at 4 calls
    assert got[("lw", "capcal")]["p_holm_tau_psi"] < 0.05
    view = {(r["model"], r["method"]): r for r in result.view.iter_rows(named=True)}
    assert view[("lw", "capcal")]["τ-PSI"].endswith("†") and view[("pw (ref.)", "none")]["τ-PSI"][-1] != "†"
    assert "front" in view[("lw", "permsc@2")] and "cost" in view[("lw", "permsc@2")]["front"]
    from posbias.paper.frontier import frontier_figure

    frontier_figure(per_query, stability, {"lw-s1": "lw"}, None, tmp_path / "frontier.png")
    assert (tmp_path / "frontier.png").stat().st_size > 10_000 and (tmp_path / "frontier.pdf").exists()


def test_the_pooled_over_bases_comparison_pairs_ocsft_with_single_order_per_base(tmp_path):
    """OC-SFT's Figure 3: per (base, collection) cell OC-SFT's Jaccard gain and τ-PSI drop over single
    order (seed means), pooled over cells; the dev split and K > 1 rows are left out."""
    from posbias.paper.bases import base_cells, bases_figure, bases_table

    rows = []
    for model, jaccard, tau in (("oc-a-s1", 0.9, 0.20), ("oc-a-s2", 0.8, 0.30), ("so-a", 0.5, 0.40),
                                ("oc-b", 0.7, 0.10), ("so-b", 0.6, 0.30), ("pa-a", 0.6, 0.2)):
        for dataset, shift in (("dl19", 0.0), ("dl20", -0.1), ("dev", 0.5)):
            rows.append({"model": model, "dataset": dataset, "retriever": "bm25", "k": 1,
                         "jaccard": jaccard + shift, "tau_psi": tau})
            rows.append({"model": model, "dataset": dataset, "retriever": "bm25", "k": 4, "jaccard": 1.0, "tau_psi": 0.0})
    table = pl.DataFrame(rows)
    pairs = [{"base": "a", "data": "train", "ocsft": "oc-a", "single": "so-a", "objectives": ["oc-a", "so-a", "pa-a"]},
             {"base": "b", "data": "train", "ocsft": "oc-b", "single": "so-b", "objectives": ["oc-b", "so-b"]}]
    cells = base_cells(table, pairs, {"oc-a-s1": "oc-a", "oc-a-s2": "oc-a"}, dev="dev")
    assert cells.select("base", "dataset").rows() == [("a", "dl19"), ("a", "dl20"), ("b", "dl19"), ("b", "dl20")]
    assert cells["jaccard_gain"].to_list() == pytest.approx([0.35, 0.35, 0.1, 0.1])  # (0.9 + 0.8)/2 − 0.5
    assert cells["tau_psi_drop"].to_list() == pytest.approx([0.15, 0.15, 0.2, 0.2])
    # "12 个基座上 τ-PSI 全部最低": on base a another objective (τ-PSI 0.20) is below OC-SFT's 0.25
    assert cells["lowest"].to_list() == [False, False, True, True] and cells["objectives"].to_list() == [3, 3, 2, 2]
    out = bases_table(cells)
    assert out.data["base"].to_list() == ["a", "b", "pooled"] and out.data["cells"].to_list() == [2, 2, 4]
    assert out.view["τ-PSI lowest of its base's objectives"].to_list() == ["0/2 cells", "2/2 cells", "2/4 cells"]
    assert out.data["jaccard_gain"].to_list() == pytest.approx([0.35, 0.1, 0.225])
    bases_figure(cells, tmp_path / "bases.png")
    assert (tmp_path / "bases.png").stat().st_size > 10_000 and (tmp_path / "bases.pdf").exists()
    assert base_cells(table, [{**pairs[0], "single": "missing"}], {}).height == 0


def test_calls_at_reads_the_fixed_budget_curve_known_answers():
    from posbias.paper.adaptive_savings import calls_at

    curve = [(5.0, 0.30), (10.0, 0.50), (15.0, 0.60), (30.0, 0.70)]  # retention Jaccard rising with K
    assert calls_at(curve, 0.55, "max") == pytest.approx(12.5)  # halfway between K = 2 and K = 3
    assert calls_at(curve, 0.20, "max") == 5.0 and math.isnan(calls_at(curve, 0.75, "max"))
    falling = [(15.0, 0.07), (5.0, 0.12), (10.0, 0.09)]  # τ-PSI falling with K, in any order
    assert calls_at(falling, 0.08, "min") == pytest.approx(12.5)
    # a non-monotone curve: the first fixed K at least as good counts
    assert calls_at([(1.0, 0.5), (2.0, 0.8), (3.0, 0.6)], 0.7, "max") == pytest.approx(1 + 0.2 / 0.3)


def test_adaptive_savings_compare_each_adaptive_row_with_its_own_fixed_curve():
    """An adaptive row at 3.5 draws (17.5 calls) between BSC@3 and BSC@6: its Jaccard needs 18.75 fixed calls
    (7% saved), its τ-PSI 15 (the adaptive pays 17% more), its nDCG@10 more than any fixed K measured; the
    CapCal row at K = 1 is not part of the fixed curve."""
    from posbias.paper.adaptive_savings import savings_rows

    base = {"dataset": "d", "retriever": "r", "family": "pointwise", "variant": "m"}
    rows = pl.DataFrame([
        base | {"method": "none", "k": 1, "budget": "fixed", "calls": 5.0, "draws": 1.0, "ndcg10": 0.70, "tau_psi": 0.12, "jaccard": 0.80},
        base | {"method": "capcal", "k": 1, "budget": "fixed", "calls": 10.0, "draws": 1.0, "ndcg10": 0.99, "tau_psi": 0.01, "jaccard": 0.99},
        base | {"method": "bsc@3", "k": 3, "budget": "fixed", "calls": 15.0, "draws": 3.0, "ndcg10": 0.80, "tau_psi": 0.07, "jaccard": 0.88},
        base | {"method": "bsc@6", "k": 6, "budget": "fixed", "calls": 30.0, "draws": 6.0, "ndcg10": 0.82, "tau_psi": 0.05, "jaccard": 0.92},
        base | {"method": "bsc@≤6 adaptive", "k": 6, "budget": "adaptive", "calls": 17.5, "draws": 3.5, "ndcg10": 0.83, "tau_psi": 0.07, "jaccard": 0.89},
    ])
    (row,) = savings_rows(rows).iter_rows(named=True)
    assert row["jaccard_fixed_calls"] == pytest.approx(18.75) and row["jaccard_saved"] == pytest.approx(1 - 17.5 / 18.75)
    assert row["tau_psi_fixed_calls"] == pytest.approx(15.0) and row["tau_psi_saved"] == pytest.approx(1 - 17.5 / 15)
    assert math.isnan(row["ndcg10_fixed_calls"]) and row["ndcg10_saved"] == pytest.approx(1 - 17.5 / 30)
    assert row["max_fixed_calls"] == 30.0


def test_teachers_put_label_quality_and_silver_beta_beside_their_students_with_pearson_r(tmp_path):
    """Three teachers of one group (r over them, known answers by scipy's Pearson) and a group with one
    teacher, which has no correlation; a teacher's silver-β is read from its shuffled labels, a student's
    quality is the mean over its seeds."""
    from scipy.stats import pearsonr

    from posbias.paper.teachers import correlations, pearson, teacher_rows

    study = [{"variant": v, "method": "single_order", "data": "train", "base": "grader", "teacher": t}
             for v, t in (("so-slot", "slot"), ("so-mild", "mild"), ("so-fair", "fair"))]
    study.append({"variant": "qa", "method": "single_order", "data": "qa-train", "base": "grader", "teacher": "slot"})
    silver = pl.DataFrame({"dataset": ["train"] * 4 + ["qa-train"], "teacher": ["slot", "slot", "mild", "fair", "slot"],
                           "shuffles": [0, 10, 10, 10, 10], "label_ndcg10": [0.6, 0.6, 0.8, 0.95, 0.5],
                           "silver_beta": [float("nan"), 0.40, 0.20, 0.0, 0.3], "label_sd": 0.1})
    parts = [_stability_rows(m, "toy", 0.1, 0.8)[0] for m in ("so-slot-s1", "so-slot-s2", "so-mild", "so-fair", "qa")]
    table = pl.concat(parts).with_columns(pl.col("k").cast(pl.Int32), debias=pl.lit("none"),
                                          ndcg10=pl.Series([0.60, 0.70, 0.80, 0.90, 0.5]),
                                          tau_psi=pl.Series([0.4, 0.4, 0.3, 0.1, 0.2]))
    variants = {"so-slot-s1": "so-slot", "so-slot-s2": "so-slot"}
    rows = {r["variant"]: r for r in teacher_rows(table, silver, study, variants).iter_rows(named=True)}
    assert rows["so-slot"]["silver_beta"] == 0.40 and rows["so-slot"]["ndcg10"] == pytest.approx(0.65)
    assert rows["so-slot"]["seeds"] == 2 and rows["so-fair"]["label_ndcg10"] == 0.95
    corr = {(r["data"], r["pair"]): r for r in correlations(teacher_rows(table, silver, study, variants)).iter_rows(named=True)}
    expected = pearsonr([0.40, 0.20, 0.0], [0.65, 0.80, 0.90]).statistic
    assert corr[("train", "silver-β × student nDCG@10")]["r"] == pytest.approx(expected) and expected < -0.9
    assert corr[("train", "silver-β × label quality")]["teachers"] == 3
    assert corr[("train", "silver-β × student nDCG@10")]["paper_r"] == -0.852
    assert math.isnan(corr[("qa-train", "silver-β × student nDCG@10")]["r"])
    assert math.isnan(pearson([0.1, 0.1, 0.1], [0.2, 0.3, 0.4]))  # a constant side has no r
    table_out = paper.build("teachers", stability=table, silver_stats=silver, teacher_study=study, variants=variants,
                            dev=None)
    assert "| train · single_order · grader | so-fair | fair | toy | 0.950 | 0.000 | 0.900 |" in \
        paper.write(table_out, tmp_path / "teachers", "t")[0].read_text()


def test_the_channels_table_reads_each_probe_and_counts_the_cells_below_the_reference(tmp_path):
    """A channel's τ-PSI is its probe row's plain_shift (rename@1: markers, skeleton@NAME: the skeleton; mean
    over seeds), beside the plain row's order τ-PSI; on markers the penalty is below OC-SFT in both cells, on
    every query (†), 2/2, marker-diverse SFT 0/2; the skeleton channel has its own reference and count; a
    rename@4 row probes nothing."""
    parts = []
    probes = {"rename@1": {"oc-s1": 0.05, "oc-s2": 0.07, "pen": 0.01, "div": 0.08},
              "skeleton@relevance": {"oc-s1": 0.02, "oc-s2": 0.02, "so": 0.04}, "rename@4": {"pen": 0.5}}
    for dataset in ("d1", "d2"):
        for model in ("oc-s1", "oc-s2", "pen", "div", "so"):
            for debias in ("none", *probes):
                if debias != "none" and model not in probes[debias]:
                    continue
                value = probes[debias][model] if debias != "none" else 0.0
                row, per_query = _stability_rows(model, dataset, 0.2 if debias == "none" else 0.0, 0.8)
                parts.append((row.with_columns(debias=pl.lit(debias), plain_shift=pl.lit(value)),
                              per_query.with_columns(debias=pl.lit(debias),
                                                     plain_shift=pl.Series([value + 0.001 * q for q in range(20)]))))
    table = pl.concat([p[0] for p in parts]).with_columns(pl.col("k").cast(pl.Int32))
    per_query = pl.concat([p[1] for p in parts])
    result = paper.build("channels", stability=table, stability_queries=per_query,
                         variants={"oc-s1": "oc", "oc-s2": "oc"}, references=["other", "oc"])
    data = {(r["variant"], r["dataset"], r["channel"]): r for r in result.data.iter_rows(named=True)}
    assert data["oc", "d1", "markers"]["channel_tau_psi"] == pytest.approx(0.06) and data["oc", "d1", "markers"]["seeds"] == 2
    assert data["oc", "d1", "markers"]["tau_psi"] == pytest.approx(0.2 + 0.095)  # the plain rows' order τ-PSI
    assert data["pen", "d2", "markers"]["channel_gain"] == pytest.approx(-0.05)
    assert data["div", "d1", "markers"]["channel_gain"] == pytest.approx(0.02)
    assert data["so", "d1", "skeleton"]["channel_gain"] == pytest.approx(0.02) and ("pen", "d1", "skeleton") not in data
    assert result.data.height == 2 * (3 + 2)  # per cell: 3 variants on markers, 2 on the skeleton; rename@4 no probe
    from posbias.paper.channels import cells_below
    counts = cells_below(result.data, {"markers": "oc", "skeleton": "oc"})
    assert counts == {("markers", "pen"): (2, 2), ("markers", "div"): (0, 2), ("skeleton", "so"): (0, 2)}
    view = {(r["variant"], r["dataset"], r["channel"]): r for r in result.view.iter_rows(named=True)}
    assert view["pen", "d1 · bm25", "markers"]["Δ channel τ-PSI"] == "-0.050†"
    assert view["oc", "d1 · bm25", "markers"]["Δ channel τ-PSI"] == "–"
    assert "markers, pen: 2/2; markers, div: 0/2; skeleton, so: 0/2" in result.notes
    empty = paper.build("channels", stability=table.filter(pl.col("debias") == "none"),
                        stability_queries=per_query, variants={}, references=["oc"])
    assert empty.data.is_empty() and "rename@1" in empty.notes
    assert "none probed" in paper.write(empty, tmp_path / "channels", "c")[0].read_text()


def test_the_label_budget_puts_each_student_at_its_labelled_queries_times_teacher_views(tmp_path):
    """OC-SFT on 100 of 800 labelled queries (one view) costs 100; order-averaged on all 800 over 1 + 10 views
    costs 8,800; a budget above the labelled queries is capped; the group's variants come in cost order."""
    study = [{"variant": v, "method": m, "data": "train", "base": "grader", "teacher": "slot", "shuffles": t,
              "max_queries": q}
             for v, m, t, q in (("oa", "order_averaged", 10, None), ("oc", "ocsft", 0, None),
                                ("oc-q100", "ocsft", 0, 100), ("oc-q2k", "ocsft", 0, 2000))]
    silver = pl.DataFrame({"dataset": "train", "teacher": "slot", "shuffles": [0, 10], "queries": [800, 800],
                           "label_ndcg10": 0.7, "silver_beta": [float("nan"), 0.4], "label_sd": 0.1})
    parts = [_stability_rows(m, "toy", 0.1, jac)[0] for m, jac in
             (("oa-s1", 0.5), ("oa-s2", 0.7), ("oc", 0.95), ("oc-q100", 0.9), ("oc-q2k", 0.96))]
    table = pl.concat(parts).with_columns(pl.col("k").cast(pl.Int32), debias=pl.lit("none"))
    variants = {"oa-s1": "oa", "oa-s2": "oa"}
    result = paper.build("label_budget", stability=table, silver_stats=silver, label_budget=study,
                         variants=variants, dev=None)
    rows = result.data
    assert rows["variant"].to_list() == ["oc-q100", "oc", "oc-q2k", "oa"]
    assert rows["label_cost"].to_list() == [100, 800, 800, 8800] and rows["views"].to_list() == [1, 1, 1, 11]
    oa = rows.filter(pl.col("variant") == "oa").row(0, named=True)
    assert oa["jaccard"] == pytest.approx(0.6) and oa["seeds"] == 2 and oa["label"] == "order-averaged"
    view = result.view.row(0, named=True)
    assert view["labelled queries"] == "100" and view["retention Jaccard"] == "0.900"
    paper.draw("label_budget", tmp_path / "budget.png", stability=table, silver_stats=silver, label_budget=study,
               variants=variants, dev=None)
    assert (tmp_path / "budget.png").stat().st_size > 0


def test_students_are_compared_on_the_datasets_all_of_them_ran_on():
    """OC-SFT's teachers and label budgets: the self-distilled student ran on an easy and a hard collection,
    the open teacher's and the 1K-label students on the easy one only, so each group averages the easy one
    (on 0.17.0 the first student's mean took in the hard collection and the comparison read its difficulty)."""
    from posbias.paper.label_budget import budget_rows
    from posbias.paper.teachers import teacher_rows

    def rows(model, dataset, jaccard):
        return _stability_rows(model, dataset, 0.1, jaccard)[0]

    table = pl.concat([rows("own", "easy", 0.9), rows("own", "hard", 0.3), rows("open", "easy", 0.8),
                       rows("k1", "easy", 0.85)]).with_columns(pl.col("k").cast(pl.Int32), debias=pl.lit("none"))
    silver = pl.DataFrame({"dataset": "train", "teacher": ["own", "open"], "shuffles": [10, 10], "queries": [800, 800],
                           "label_ndcg10": [0.7, 0.8], "silver_beta": [0.4, 0.2], "label_sd": 0.1})
    teachers = [{"variant": v, "method": "single_order", "data": "train", "base": "b", "teacher": t}
                for v, t in (("own", "own"), ("open", "open"))]
    by = {r["variant"]: r for r in teacher_rows(table, silver, teachers, {}).iter_rows(named=True)}
    assert by["own"]["jaccard"] == pytest.approx(0.9) and by["own"]["datasets"] == "easy" == by["open"]["datasets"]
    budget = [{"variant": v, "method": "ocsft", "data": "train", "base": "b", "teacher": "own", "shuffles": 0,
               "max_queries": q} for v, q in (("own", None), ("k1", 100))]
    by = {r["variant"]: r for r in budget_rows(table, silver, budget, {}).iter_rows(named=True)}
    assert by["own"]["jaccard"] == pytest.approx(0.9) and by["k1"]["jaccard"] == pytest.approx(0.85)
    alone = {r["variant"]: r for r in teacher_rows(table, silver, teachers[:1], {}).iter_rows(named=True)}
    assert alone["own"]["jaccard"] == pytest.approx(0.6) and alone["own"]["datasets"] == "easy, hard"


def test_one_checkpoint_across_widths_reports_latency_saved_against_b1():
    """Entries reading one checkpoint at B = 1, 5 and 20 become its rows, latency saved = 1 − s/s(B = 1);
    a scorer the widths do not list, K > 1 rows and debiasing methods are left out."""
    from posbias.paper.serving_width import serving_width

    def row(model, seconds, k=1, debias="none", budget="fixed"):
        return {"model": model, "dataset": "d", "retriever": "r", "debias": debias, "k": k, "budget": budget,
                "ndcg10_canonical": 0.5, "ndcg10": 0.5, "tau_psi": 0.1, "jaccard": 0.9, "calls_per_query": 1.0,
                "seconds_per_query": seconds}

    stability = pl.DataFrame([row("ck", 1.1), row("ck-b1", 2.0), row("ck-b5", 1.5), row("ck", 9.0, k=2),
                              row("ck", 9.0, debias="rename@1"), row("other", 1.0)]).with_columns(pl.col("k").cast(pl.Int32))
    widths = [{"model": m, "dataset": "d", "retriever": "r", "checkpoint": c, "window": b}
              for m, c, b in (("ck", "ck", 20), ("ck-b1", "ck", 1), ("ck-b5", "ck", 5))]
    table = serving_width(stability, widths)
    assert table.data["window"].to_list() == [1, 5, 20] and set(table.data["checkpoint"]) == {"ck"}
    assert table.data["latency_saved"].to_list() == pytest.approx([0.0, 0.25, 0.45])
    assert table.view["latency saved vs B = 1"].to_list() == ["0%", "25%", "45%"]


def test_line_styles_give_up_to_a_hundred_lines_a_colour_and_marker_pair_each():
    from posbias.paper.writers import line_styles

    styles = [(s["color"], s["marker"]) for s in line_styles(100)]
    assert len(set(styles)) == 100 and len({c for c, _ in styles[:10]}) == 10


def test_a_config_is_given_only_the_paper_tables_and_figures_it_fills():
    """posbias.paper.scope, read from the config alone: the default run fills every paper table and figure;
    the OC-SFT toy (pointwise students, shuffles only, no CapCal, no listwise training) none of the position,
    CapCal, ablation or reference-against-baselines ones, which it used to write with a "none" body."""
    from posbias import config

    default = config.load(REPO / "config" / "config.yaml", files=False)
    assert paper.filled(paper.TABLES, "paper_table", default) == paper.names(paper.TABLES, "paper_table")
    assert paper.filled(paper.FIGURES, "paper_figure", default) == paper.names(paper.FIGURES, "paper_figure")
    toy = config.load(REPO / "config" / "examples" / "ocsft-toy.yaml", files=False)
    assert paper.filled(paper.TABLES, "paper_table", toy) == ["original_vs_shuffled", "retrievers"]
    assert paper.filled(paper.FIGURES, "paper_figure", toy) == ["inference_vs_training"]
    # one experiment more and the table is back: a CapCal variant on one toy student
    toy["reranking"]["experiments"][0]["debias"].append("capcal")
    assert "capcal" in paper.filled(paper.TABLES, "paper_table", toy)


def test_markdown_tables_keep_cells_as_written_and_escape_pipes():
    from posbias.paper.writers import markdown_rows

    view = pl.DataFrame({"model": ["sim-grades (ref.)", "a|b"], "nDCG@10": ["0.5000", "–"]})
    assert markdown_rows(view) == ["| model | nDCG@10 |", "|---|---|", "| sim-grades (ref.) | 0.5000 |",
                                   "| a\\|b | – |"]
