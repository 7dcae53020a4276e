"""The default workflow (config/config.yaml, what ``./posbias.sh demo`` runs), run once per session
(``tests/runs.py``): each claim about it is a test of its own. The tests at the end of the file rerun
parts of it (the report stage, the data stage, dry runs of edited configs) and come last on purpose."""

from __future__ import annotations

import json
import math
import re

import polars as pl
import pytest
import yaml

from tests.conftest import REPO, snakemake
from tests.test_published import STUDY

pytestmark = pytest.mark.workflow


def _ndcg(run, dataset, retriever):
    frame = pl.read_parquet(run.path("results", "metrics", "retrieval", dataset, f"{retriever}.parquet"))
    return frame.filter(pl.col("measure") == "nDCG@10")["value"].mean()


def _summary(run) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in run.path("results", "metrics", "rerank").rglob("*.summary.parquet")])


def test_the_default_run_completes_and_says_where_the_tables_are(default_run):
    assert "posbias: done; tables are in" in default_run.out.stderr


def test_first_stage_retrieval_on_the_synthetic_collection(default_run):
    table = default_run.text("results", "tables", "retrieval.md")
    assert "| synthetic | bm25 | 100 |" in table
    bm25, dense = _ndcg(default_run, "synthetic", "bm25"), _ndcg(default_run, "synthetic", "dense")
    # Realistic: BM25 clearly above random (~0.02 on this collection) and clearly below 1.
    assert 0.5 < bm25 < 0.95
    assert dense > 0.1
    for retriever in ("splade", "rrf"):
        run = pl.read_parquet(default_run.path("results", "runs", "synthetic", f"{retriever}.parquet"))
        assert run["query_id"].n_unique() == 100
    listwise = pl.read_parquet(default_run.path("results", "data", "synthetic-train", "listwise.parquet"))
    assert listwise.height == 300


def test_the_toy_story_first_is_position_bound_and_debiasfirst_is_not(default_run):
    """First trained on biased orders is position-bound; DebiasFirst keeps at most half its position effect
    and is better under shuffles (one seed each).

    Not "flat": the trainings are seeded but not bitwise the same across CPUs, and one seed's DebiasFirst
    keeps a bump at one position on some machines (measured on an AMD EPYC without AVX-512: seed 1 ranks
    the relevant passage 1.97th from input position 13, spread 0.358; seed 2 flat; the same there at 0.17.0's
    commit, whose CI machine passed this test's old bound, a mean spread of at most 0.1)."""
    table = default_run.table("position_bias")
    story = {r["model"]: r for r in table.filter(pl.col("debias") == "none").to_dicts()}
    first, debiased = story["toy-first"], story["toy-debiasfirst"]
    # a position_debias method is a row of its own: CapCal with alpha = 1 flattens the simulator's curve exactly
    calibrated = table.filter((pl.col("model") == "sim-linear") & (pl.col("debias") == "capcal@exact"))
    assert calibrated.height == 1 and calibrated["spread"][0] == 0.0
    assert first["seeds"] == 1 and debiased["seeds"] == 1 and first["positions"] == 4
    assert first["spread"] >= 0.5 and debiased["spread"] <= 0.5 * first["spread"], (first, debiased)
    assert debiased["ndcg10_shuffled"] >= first["ndcg10_shuffled"] + 0.1, (first, debiased)


def test_every_reranking_experiment_is_summarised(default_run):
    summary = _summary(default_run)
    assert set(summary["model"]) == {"toy-first-s1", "toy-debiasfirst-s1",
                                     "tiny-gen", "sim-linear", "tiny-ocsft", "tiny-single-order", "sim-grades",
                                     "sim-grades-steady", "sim-lists", "tiny-ocsft-b1", "tiny-ocsft-b5",
                                     "smollm2"}
    toy = {r["debias"]: r for r in summary.filter(pl.col("model") == "toy-first-s1").to_dicts()}
    assert set(toy) == {"none", "permsc@3"} and toy["none"]["queries"] == 100
    assert toy["none"]["prompt_tokens_per_query"] == 131  # the compact prompt, one token per word
    table = default_run.text("results", "tables", "rerank.md")
    assert "| sim-linear | dl19 | imported:bm25 | none | 43 |" in table and "| toy-first-s1 | toy | biased | permsc@3 |" in table


def test_smollm2_is_converted_from_its_gguf_wheel_and_reranks_dl19(default_run):
    """The real model: converted once (its GGUF's sha256 recorded), read as FIRST on 5 DL19 queries in every
    order of its experiment, with PermSC and CapCal; its numbers are whatever it reads (nothing asserted on
    their direction here: the claims section reports that)."""
    record = json.loads(default_run.text("results", "models", "smollm2", "gguf.json"))
    assert record["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert record["architecture"] == "llama" and record["parameters"] == 134515008 and record["chat_template"]
    assert record["provenance"]["rule"] == "convert_gguf"
    summary = {r["debias"]: r for r in _summary(default_run).filter(pl.col("model") == "smollm2").to_dicts()}
    assert set(summary) == {"none", "permsc@3", "capcal"}
    plain = summary["none"]
    assert plain["queries"] == 5 and plain["shuffles"] == 3 and plain["calls_per_query"] == 1.0
    assert 600 < plain["prompt_tokens_per_query"] < 1000  # 20 passages at 20 words in SmolLM2's chat template
    assert not math.isnan(plain["psi"]) and 0 <= plain["psi"] <= 1
    assert summary["capcal"]["calls_per_query"] == 2.0  # one extra pass: the content-free prior


def smollm2_readme_rows(run) -> list[str]:
    """docs/demo.md's real-model table, as this run gives it (tests the page cannot go stale)."""
    summary = {r["debias"]: r for r in _summary(run).filter(pl.col("model") == "smollm2").to_dicts()}
    curve = pl.read_parquet(run.path("results", "metrics", "rerank", "smollm2", "dl19-real", "imported:bm25",
                                     "none.curve.parquet")).sort("position")
    claims = {r["claim"]: r for r in run.table("claims").filter(pl.col("model") == "smollm2").to_dicts()}
    plain = summary["none"]

    def claim(name):
        r = claims[name]
        return f"{r['mark']} (effect {r['effect']:+.3f}, p = {r['p']:.3f})"

    return [
        f"| nDCG@10, first-stage order | {plain['ndcg10_original']:.3f} |",
        f"| nDCG@10, 3 shuffled orders (mean ± sd over orders) | {plain['ndcg10_shuffled_mean']:.3f} ± "
        f"{plain['ndcg10_shuffled_sd']:.3f} |",
        f"| τ-PSI over the shuffles | {plain['tau_psi']:.3f} |",
        "| nDCG@10 of the relevant passage moved to input position 1 / 10 / 20 | "
        + " / ".join(f"{v:.3f}" for v in curve["target_ndcg10"]) + f" (PSI {plain['psi']:.3f}) |",
        f"| PermSC@3, CapCal (nDCG@10, first-stage order) | {summary['permsc@3']['ndcg10_original']:.3f}, "
        f"{summary['capcal']['ndcg10_original']:.3f} |",
        f"| claims: shuffling lowers quality; late positions lose | {claim('shuffling-lowers-quality')}; "
        f"{claim('late-positions-lose')} |",
        f"| claims: PermSC beats one list; CapCal lifts quality | {claim('permsc-beats-one-list')}; "
        f"{claim('capcal-lifts-quality')} |",
    ]


def test_the_demo_page_shows_this_runs_real_model_numbers(default_run):
    page = (REPO / "docs" / "demo.md").read_text()
    missing = [row for row in smollm2_readme_rows(default_run) if row not in page]
    assert not missing, "docs/demo.md's SmolLM2 table is stale; this run gives:\n" + "\n".join(missing)


def test_the_real_model_slice_reruns_the_published_studys_cells(default_run):
    """The published zero-shot study cannot drift from the code: the default run's SmolLM2 experiment is a
    slice of it (config/examples/real-llms-first.yaml: the same seed, word budget, shuffles, positions and
    CapCal; 5 of its 43 DL19 queries; transformers here, vLLM there), and every per-query nDCG@10 it reranks
    (each order, PermSC@3, CapCal) is the committed one."""
    published = pl.read_csv(STUDY / "per_query.csv", schema_overrides={"query_id": pl.Utf8}).filter(
        (pl.col("model") == "smollm2") & (pl.col("dataset") == "dl19") & (pl.col("measure") == "nDCG@10"))
    folder = default_run.path("results", "metrics", "rerank", "smollm2", "dl19-real", "imported:bm25")
    ours = pl.concat([pl.read_parquet(folder / f"{d}.parquet") for d in ("none", "permsc@3", "capcal")]).filter(
        pl.col("measure") == "nDCG@10")
    cells = ours.join(published, on=["order", "debias", "query_id"], how="left", suffix="_published")
    assert cells["value_published"].null_count() == 0, cells.filter(pl.col("value_published").is_null())
    assert set(cells["debias"]) == {"none", "permsc@3", "capcal"} and cells.height >= 50, cells.height
    moved = cells.filter((pl.col("value") - pl.col("value_published")).abs() > 1e-9)
    assert moved.is_empty(), f"{moved.height} of {cells.height} cells differ from the study's:\n{moved}"


def test_the_claims_section_tests_every_reranked_model(default_run):
    """The reproduction table's second section: each directional claim on each experiment, holds / fails with
    its test, or left out as not run; SmolLM2's experiment tests all four."""
    text = default_run.text("results", "tables", "reproduction.md")
    assert "## The papers' directional claims on this run's models" in text
    rows = default_run.table("claims")
    smollm2 = {r["claim"]: r for r in rows.filter(pl.col("model") == "smollm2").to_dicts()}
    assert set(smollm2) == {"shuffling-lowers-quality", "late-positions-lose", "permsc-beats-one-list",
                            "capcal-lifts-quality"}
    assert all(r["mark"] in ("holds", "fails") and r["queries"] >= 4 for r in smollm2.values()), smollm2
    assert smollm2["late-positions-lose"]["compared"] == "relevant passage at input position 1 vs 20"
    toy = {r["claim"]: r["mark"] for r in rows.filter(pl.col("model") == "toy-first-s1").to_dicts()}
    assert toy["shuffling-lowers-quality"] == "holds" and toy["capcal-lifts-quality"] == "not run"


def test_the_debiasing_methods_on_the_simulated_reranker_over_dl19(default_run):
    """The simulated reranker on DL19 with every debiasing method."""
    summary = _summary(default_run)
    sim = {r["debias"]: r for r in summary.filter((pl.col("model") == "sim-linear") & (pl.col("dataset") == "dl19")).to_dicts()}
    assert set(sim) == {"none", "permsc@3", "capcal", "capcal@exact", "bsc@3"}
    assert sim["none"]["queries"] == 43 and sim["none"]["shuffles"] == 3
    assert sim["none"]["tau_psi"] > 0.01  # a linear positional prior makes the ranking order-sensitive ...
    assert sim["none"]["curve_first"] > sim["none"]["curve_last"]  # ... and favours early positions
    # CapCal with alpha = 1 inverts the probability-space bias exactly: a flat position curve, the same
    # quality in every order, better than uncalibrated; one content-free prior, no extra call per window
    exact = sim["capcal@exact"]
    assert exact["curve_spread"] == 0.0 and exact["ndcg10_original"] == pytest.approx(exact["ndcg10_shuffled_mean"])
    assert exact["ndcg10_original"] > sim["none"]["ndcg10_original"] and exact["calls_per_query"] == sim["none"]["calls_per_query"]
    # the entropy-adaptive α follows each window's entropy, below its cap (α_max = 1) in every window;
    # capcal@exact's α is the fixed 1, with no share at a cap to report
    adaptive = sim["capcal"]
    assert 0 < adaptive["capcal_alpha_mean"] < 1 and adaptive["capcal_alpha_sd"] > 0 and adaptive["capcal_at_cap"] == 0
    assert exact["capcal_alpha_mean"] == 1 and exact["capcal_alpha_sd"] == 0 and math.isnan(exact["capcal_at_cap"])
    assert math.isnan(sim["none"]["capcal_alpha_mean"])
    # BSC: averaging 3 views lowers the sensitivity, at 3x the calls (permsc-window@K: tests/test_permuted_eval.py)
    assert sim["bsc@3"]["tau_psi"] < sim["none"]["tau_psi"]
    assert sim["bsc@3"]["calls_per_query"] == pytest.approx(3 * sim["none"]["calls_per_query"])
    # PermSC over the 3 reranked shuffled lists: one ranking, better than one shuffled pass, 3 passes of cost
    assert sim["permsc@3"]["ndcg10_original"] > sim["none"]["ndcg10_shuffled_mean"]
    assert sim["permsc@3"]["calls_per_query"] == pytest.approx(3 * sim["none"]["calls_per_query"])


def _reranked(run, model, dataset, retriever, order, debias, suffix="parquet"):
    """One reranked order's file: in the batch folder of the rerank job that reranked it, or a list-level
    method's combined run (posbias.paths.in_batch, posbias.paths.reranked)."""
    base = run.path("results", "rerank", model, dataset, retriever)
    found = [*base.glob(f"batches/{debias}.*/{order}.{suffix}"), *base.glob(f"{order}/{debias}.{suffix}")]
    assert len(found) == 1, found
    return found[0]


def test_every_reranked_run_is_also_the_same_trec_run(default_run):
    """Every reranked run is also a TREC run file that trec_eval / ranx / rank_llm read: the same ranking."""
    from posbias.runs import read_trec

    for order, debias in (("original", "none"), ("shuffled-0", "capcal"), ("original", "permsc@3")):
        where = ("sim-linear", "dl19", "imported:bm25", order, debias)
        parquet = pl.read_parquet(_reranked(default_run, *where)).sort("query_id", "rank")
        trec = read_trec(_reranked(default_run, *where, "trec")).sort("query_id", "rank")
        assert trec.select("query_id", "doc_id", "rank").equals(parquet.select("query_id", "doc_id", "rank"))


def test_the_compute_plan_matches_the_run_in_every_exact_order(default_run):
    check = default_run.table("plan_check")
    assert set(check["family"]) == {"rerank", "propensity_rerank"} and check["orders"].sum() == 115
    assert (check["calls_match"] == check["orders"]).all() and (check["tokens_match"] == check["orders"]).all()
    assert (check["prompt_tokens"] == check["prompt_tokens_actual"]).all() and check["prompt_tokens"].sum() > 0
    exact = check.filter(pl.col("calls_exact"))
    assert (exact["calls"] == exact["calls_actual"]).all() and set(check.filter(~pl.col("calls_exact"))["model"]) == {"tiny-gen"}
    planned = pl.read_csv(default_run.path("results", "plan", "cost.csv"))
    assert planned.filter(pl.col("family") == "rerank")["jobs"].sum() == 28


def test_the_debiasfirst_branch_omega_augmentation_and_continued_training(default_run):
    """Omega of the first seed's First model, the augmented sets, DebiasFirst continued from First."""
    omega = pl.read_parquet(default_run.path("results", "propensity", "toy-first-s1", "omega.parquet"))
    assert omega.height == 400 and omega["omega"].sum() == pytest.approx(1.0)
    row_sums = omega.group_by("input_position").agg(pl.col("omega").sum())["omega"]
    assert row_sums.to_list() == pytest.approx([1 / 20] * 20)  # every position is shown equally often
    posaug = pl.read_parquet(default_run.path("results", "train", "toy-train", "posaug.parquet"))
    assert posaug.height == 4 * 12800
    for name, steps in (("toy-first-s1", 400), ("toy-debiasfirst-s1", 600)):
        meta = json.loads(default_run.text("results", "models", name, "posbias_training.json"))
        assert meta["steps"] == steps
        curve = pl.read_parquet(default_run.path("results", "metrics", "train", f"{name}.parquet"))
        assert curve["lm_loss"].is_not_nan().all() and curve["lm_loss"][-1] < curve["lm_loss"][0]
    meta = json.loads(default_run.text("results", "models", "toy-debiasfirst-s1", "posbias_training.json"))
    assert meta["base_model"].endswith("toy-first-s1")
    figure = default_run.path("results", "figures", "position_curve.png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000


def test_the_ocsft_branch_silver_labels_training_and_stability(default_run):
    """qrels silver labels, ocsft and single_order trained, the quality-vs-stability table."""
    silver = pl.read_parquet(default_run.path("results", "silver", "synthetic-train", "qrels", "t0.parquet"))
    per_query = silver.group_by("query_id").len()["len"]  # BM25's top 40, or fewer where fewer passages match
    assert silver["query_id"].n_unique() == 50 and per_query.max() == 40 and per_query.min() >= 20
    ocsft = pl.read_parquet(default_run.path("results", "metrics", "train", "tiny-ocsft.parquet"))
    assert (ocsft["consistency_loss"] > 0).any() and ocsft["supervised_loss"].is_not_nan().all()
    single = pl.read_parquet(default_run.path("results", "metrics", "train", "tiny-single-order.parquet"))
    assert (single["consistency_loss"] == 0).all()
    stab = pl.concat([pl.read_parquet(p) for p in default_run.path("results", "metrics", "stability").rglob("*.parquet")
                      if not p.name.endswith(".queries.parquet")])
    assert set(stab.filter(pl.col("family") == "pointwise")["model"]) == {
        "tiny-ocsft", "tiny-single-order", "sim-grades", "sim-grades-steady", "tiny-ocsft-b1", "tiny-ocsft-b5"}
    # every listwise experiment with shuffled orders, per window-level debiasing method (PermSC@K rows on none)
    assert set(stab.filter(pl.col("family") == "listwise").select("model", "debias").iter_rows()) == {
        *((m, "none") for m in ("toy-first-s1", "toy-debiasfirst-s1")),
        *(("sim-linear", d) for d in ("none", "capcal", "capcal@exact", "bsc@3")), ("sim-lists", "none"),
        ("smollm2", "none"), ("smollm2", "capcal")}
    sim = {r["k"]: r for r in stab.filter((pl.col("model") == "sim-grades") & (pl.col("budget") == "fixed")).to_dicts()}
    assert sim[1]["presentations"] == 10 and 0.05 < sim[1]["tau_psi"] and sim[1]["jaccard"] < 0.9
    assert sim[3]["jaccard"] > sim[1]["jaccard"]  # BSC over 3 shuffles steadies the retained set
    table = default_run.text("results", "tables", "stability.md")
    assert "| tiny-ocsft | synthetic · bm25 | 1 | 1 | 20 (2) |" in table
    assert "| sim-grades | dl19 · imported:bm25 | 1 | 1 | 43 (10) |" in table
    assert "| sim-grades-steady | dl19 · imported:bm25 | ≤6 adaptive | 1 | 43 (2) |" in table
    assert "\\toprule" in default_run.text("results", "tables", "stability.tex")
    assert default_run.path("results", "figures", "bsc_curve.png").stat().st_size > 10_000


def test_the_frontier_puts_both_families_and_adaptive_budgets_on_one_table(default_run):
    """Listwise and pointwise scorers, their inference-time methods and adaptive budgets on the same DL19
    queries with their calls per query; the steadier grader's adaptive BSC stops far earlier than the
    order-sensitive one's, and each pays at most BSC@6's calls."""
    both = default_run.table("frontier").filter(pl.col("dataset") == "dl19")
    rows = {(r["family"], r["variant"], r["method"]): r for r in both.iter_rows(named=True)}
    assert {("listwise", "sim-linear", "none"), ("listwise", "sim-linear", "capcal@exact"),
            ("pointwise", "sim-grades", "none"), ("pointwise", "sim-grades", "bsc@3"),
            ("listwise", "sim-lists", "permsc@6"), ("listwise", "sim-lists", "permsc@≤6 adaptive")} <= set(rows), rows
    assert both["queries"].unique().to_list() == [43] and both["tau_psi"].is_between(0, 1).all()
    steady, noisy = (rows[("pointwise", m, "bsc@≤6 adaptive")] for m in ("sim-grades-steady", "sim-grades"))
    fixed = rows[("pointwise", "sim-grades-steady", "bsc@6")]
    # measured: 17.3 calls (3.45 draws) for the steadier grader, 27.7 (5.53) for the other, 30 for BSC@6
    assert steady["calls"] < 0.7 * fixed["calls"] and noisy["calls"] > steady["calls"] + 5, (steady, noisy)
    assert all(rows[(f, m, f"{c}@≤6 adaptive")]["calls"] <= rows[(f, m, f"{c}@6")]["calls"]
               for f, m, c in (("pointwise", "sim-grades", "bsc"), ("listwise", "sim-lists", "permsc")))
    assert both.filter(pl.col("cost_front")).height >= 2 and both["p_holm_tau_psi"].is_not_null().any()
    assert "| sim-grades (ref.) | none |" in default_run.text("results", "tables", "frontier.md")
    assert default_run.path("results", "figures", "frontier.png").stat().st_size > 10_000


def test_adaptive_budgets_save_calls_at_equal_retention_against_fixed_k(default_run):
    """Each adaptive row against its model's fixed-K curve on the same queries: the steadier grader and the
    listwise simulator reach their retention Jaccard with fewer calls than a fixed K needs; the
    order-sensitive grader saves nothing worth the name (measured on DL19: 20%, 9% and −3%)."""
    savings = {r["variant"]: r for r in default_run.table("adaptive_savings").iter_rows(named=True)}
    assert set(savings) == {"sim-grades-steady", "sim-grades", "sim-lists"}
    steady, lists, noisy = savings["sim-grades-steady"], savings["sim-lists"], savings["sim-grades"]
    assert steady["jaccard_saved"] > 0.15 and steady["calls"] < steady["jaccard_fixed_calls"] < 30
    assert lists["jaccard_saved"] > 0.05 and lists["tau_psi_saved"] > 0.05
    assert abs(noisy["jaccard_saved"]) < 0.1 < steady["jaccard_saved"]
    assert "| sim-grades-steady | bsc@≤6 adaptive |" in default_run.text("results", "tables", "adaptive_savings.md")


def test_capcal_on_the_grades_readout_and_the_matched_retention_control(default_run):
    """CapCal (α = 1) on the tiny Grades scorers: one content-free prompt per query beside the real one, on
    the frontier with the plain scorers. The matched-rate control reads every pointwise scorer of a dataset at
    one retention rate, the relevant share, where the F1 thresholds keep different shares."""
    frontier = default_run.table("frontier").filter(pl.col("dataset") == "synthetic")
    rows = {(r["variant"], r["method"]): r for r in frontier.iter_rows(named=True)}
    for model in ("tiny-ocsft", "tiny-single-order"):
        plain, calibrated = rows[(model, "none")], rows[(model, "capcal@exact")]
        assert plain["calls"] == 1.0 and calibrated["calls"] == 2.0  # one window of 20, one content-free prompt
        assert 0 <= calibrated["tau_psi"] <= 1
        # the calibration moved the window scores; the rankings may not move (measured at 1,000 passages: these
        # random-initialised scorers' grades follow the slot, so calibrated and plain rank alike)
        scores = [pl.read_parquet(_reranked(default_run, model, "synthetic", "bm25", "original", debias,
                                            "windows.parquet"))["score"] for debias in ("none", "capcal@exact")]
        assert (scores[0] - scores[1]).abs().max() > 1e-6
    matched = default_run.table("matched_retention")
    assert set(matched["variant"]) >= {"tiny-ocsft", "tiny-single-order", "sim-grades", "sim-grades-steady"}
    for _, part in matched.group_by("dataset"):
        assert part["matched_rate"].n_unique() == 1 and 0 < part["matched_rate"][0] < 1
    dl19 = {r["variant"]: r for r in matched.filter(pl.col("dataset") == "dl19").iter_rows(named=True)}
    # measured: sim-grades keeps 0.245 at its τ* (Jaccard 0.347) and reads 0.322 at the matched 0.197
    assert dl19["sim-grades"]["retained"] > dl19["sim-grades"]["matched_rate"]
    assert dl19["sim-grades-steady"]["jaccard_matched"] > dl19["sim-grades"]["jaccard_matched"] + 0.3
    assert "| synthetic · bm25 | tiny-single-order |" in default_run.text("results", "tables", "matched_retention.md")


def test_one_checkpoint_is_served_at_three_widths(default_run):
    """The OC-SFT tiny checkpoint read at B = 1, 5 and 20: one call per window, and alone in its window
    (B = 1) a candidate's score cannot depend on the order."""
    widths = {r["window"]: r for r in default_run.table("serving_width").iter_rows(named=True)
              if r["checkpoint"] == "tiny-ocsft"}
    assert sorted(widths) == [1, 5, 20] and [widths[b]["calls_per_query"] for b in (1, 5, 20)] == [20.0, 4.0, 1.0]
    assert widths[1]["tau_psi"] < 0.05 and widths[1]["latency_saved"] == pytest.approx(0.0, abs=1e-12)
    assert all(w["seconds_per_query"] > 0 for w in widths.values())


def test_the_papers_tables_and_figures_in_every_format(default_run):
    tables, figures = default_run.path("results", "tables"), default_run.path("results", "figures")
    for name in ("position_bias", "original_vs_shuffled", "retrievers", "capcal", "ablations", "versus_baselines"):
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{name}.{ext}").stat().st_size > 100
    for name in ("position_curve", "inference_vs_training", "ablation_curves"):
        assert (figures / f"{name}.png").stat().st_size > 10_000
        assert (figures / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    assert "\\toprule" in (tables / "capcal.tex").read_text()
    capcal = {r["method"]: r for r in default_run.table("capcal").to_dicts()}
    assert set(capcal) == {"capcal", "capcal@exact", "permsc@3"}  # every CapCal variant, PermSC the comparison
    t1 = {r["model"]: r for r in default_run.table("original_vs_shuffled").to_dicts()}
    assert {"toy-first", "toy-debiasfirst", "sim-linear"} <= set(t1) and t1["toy-first"]["seeds"] == 1
    t2 = default_run.table("retrievers").filter(pl.col("dataset") == "synthetic")
    assert set(t2["retriever"]) == {"bm25", "dense", "splade", "rrf"}


def test_the_run_writes_only_the_tables_its_config_gives_rows(default_run):
    """The OC-SFT tables the default config does not ask for (no teachers compared, no label budget, no channel
    probed) are not written at all, rather than as a one-row "none" table; every table written has data."""
    tables = default_run.path("results", "tables")
    assert not {"teachers.md", "label_budget.md", "channels.md"} & {p.name for p in tables.iterdir()}
    assert not (default_run.path("results", "figures") / "teachers.png").exists()

    def placeholder(path) -> bool:  # one body row whose cell says why there is nothing (posbias.paper.writers)
        rows = [line for line in path.read_text().splitlines() if line.startswith("|")][2:]
        return len(rows) == 1 and rows[0].startswith("| none")

    assert not [p.name for p in tables.glob("*.md") if placeholder(p)]


def test_every_latex_table_of_the_run_typesets_with_pdflatex(default_run, tmp_path):
    """Issue 54: each `.tex` table the run writes compiles in one article with the packages its first lines name
    (booktabs, amssymb, CJKutf8), through Debian's pdflatex (tests/tex.py)."""
    from tests.tex import typeset

    tables = sorted(default_run.path("results", "tables").glob("*.tex"))
    assert len(tables) >= 15, tables
    assert typeset(tables, tmp_path).read_bytes()[:5] == b"%PDF-"


def test_the_reproduction_matrix_compares_only_the_imported_first_stage(default_run):
    """The toy and the tiny models are never compared with a paper: every paper figure is not run, and the
    imported DL19 BM25 run reproduces Anserini's 0.5058 (OK); the console ends with the summary line."""
    matrix = default_run.table("reproduction")
    marks = dict(zip(matrix["id"], matrix["mark"]))
    assert marks.pop("anserini-bm25-dl19") == "OK"
    assert set(marks.values()) == {"not run"}
    assert (f"posbias: reproduction: 1 OK, 0 differ, {matrix.height - 1} not run; results/tables/reproduction.md"
            in default_run.console)
    assert "| df-table1-original | debiasfirst |" in default_run.text("results", "tables", "reproduction.md")


def test_every_artifact_records_what_produced_it(default_run):
    """The job's rule, wildcards, config slice and the code version."""
    from posbias import provenance

    rec = provenance.read(default_run.path("results", "data", "synthetic", "corpus.parquet"))
    assert rec["rule"] == "prepare_dataset" and rec["wildcards"] == {"dataset": "synthetic"} and rec["git_commit"]
    assert provenance.read(default_run.path("results", "figures", "position_curve.png"))["rule"] == "paper_figure"
    assert "Produced by posbias" in default_run.text("results", "tables", "position_bias.md")


def test_every_job_left_a_log_and_a_benchmark(default_run):
    steps = int(re.findall(r"(\d+) of \d+ steps \(100%\) done", default_run.console)[-1])
    n_logs = len(list(default_run.path("logs").rglob("*.log")))
    # every job but the `all` target, which writes nothing; later tests of this module may add jobs
    assert n_logs >= steps - 1 > 100 and len(list(default_run.path("benchmarks").rglob("*.tsv"))) == n_logs


# --- reruns of the finished run: after every test that reads it as the run left it


def _plan(workdir, edit=None) -> list[tuple[str, dict]]:
    """The (rule, wildcards) of every job a dry run plans after ``edit`` of the default config (default
    rerun triggers: mtime, params, input, code, software environment)."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    if edit is not None:
        edit(cfg)
    path = workdir / f"plan-config-{abs(hash(repr(cfg)))}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))  # the config's own key order (params compare by repr)
    out = snakemake(workdir, "-n", "--configfile", str(path))
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    jobs, rule = [], None
    for line in out.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
            jobs.append((rule, {}))
        elif line.strip().startswith("wildcards:") and jobs:
            jobs[-1][1].update(kv.split("=", 1) for kv in line.split(":", 1)[1].strip().split(", "))
    return jobs


def _reversed(mapping: dict) -> dict:
    return {k: mapping[k] for k in reversed(list(mapping))}


def _reverse_keys(cfg: dict) -> None:
    """Write the keys of every config section and every entry in reverse order (the order of named
    entries, e.g. datasets, is the order of table rows and stays)."""
    for section in ("reranking", "evaluation", "propensity", "ocsft", "augmentation"):
        cfg[section] = _reversed(cfg[section])
    for group in ("datasets", "models", "retrievers", "training"):
        for name, entry in cfg[group].items():
            cfg[group][name] = _reversed(entry)
            if "hyper" in entry:
                cfg[group][name]["hyper"] = _reversed(entry["hyper"])


def _rules(jobs) -> set[str]:
    return {rule for rule, _ in jobs}


EXPENSIVE = {"rerank", "train", "silver_labels", "propensity_rerank", "build_tiny_model", "index", "retrieve",
             "prepare_dataset"}
SIM = {m for m, spec in yaml.safe_load((REPO / "config" / "config.yaml").read_text())["models"].items()
       if spec["kind"] == "simulated"}


def _new_experiment(c):
    c["reranking"]["experiments"].append({"model": "sim-grades", "dataset": "synthetic", "retriever": "bm25",
                                          "orders": ["original"]})


def _new_retriever(c):
    c["retrievers"]["bm25b"] = {"kind": "bm25", "k1": 1.2, "b": 0.75}
    c["datasets"]["synthetic"]["retrievers"].append("bm25b")


def _check_new_experiment(jobs):
    """A new experiment: its own rerank job(s), no other."""
    assert [w for r, w in jobs if r == "rerank"] == [{"model": "sim-grades", "dataset": "synthetic", "retriever": "bm25",
                                                     "debias": "none", "part": "list-0"}]
    assert not _rules(jobs) & (EXPENSIVE - {"rerank"}), _rules(jobs)


def _check_relevant_grade(jobs):
    """The position protocol's grade: only the batches of position orders rerun."""
    parts = {w["part"] for r, w in jobs if r == "rerank"}
    assert parts and all(p.startswith("position-") for p in parts), parts


def _check_bsc_k(jobs):
    """ocsft.bsc_k is read by the stability stage only."""
    assert _rules(jobs) & {"stability"} and not _rules(jobs) & EXPENSIVE, _rules(jobs)


def _check_word_budget(jobs):
    """Only the jobs of models that read passage text (no simulated model's rerank job)."""
    reran = {w["model"] for r, w in jobs if r == "rerank"}
    assert reran and not reran & SIM and "silver_labels" not in _rules(jobs), reran


def _check_new_retriever(jobs):
    """A new retriever on a dataset: its index, run and evaluation, no data or other retrieval job."""
    assert {w["retriever"] for r, w in jobs if r in ("index", "retrieve", "evaluate_run")} == {"bm25b"}
    assert not _rules(jobs) & {"prepare_dataset", "rerank", "train", "build_tiny_model"}, _rules(jobs)


def _check_logging_steps(jobs):
    """logging_steps changes the training log, not the model."""
    assert not _rules(jobs) & EXPENSIVE, _rules(jobs)


def _check_measures(jobs):
    """evaluation.measures: the evaluations and tables, no rerank, train or silver job."""
    assert {"evaluate_run", "rerank_summary"} <= _rules(jobs) and not _rules(jobs) & EXPENSIVE, _rules(jobs)


def _check_window(jobs):
    """The window: every rerank job, and nothing upstream of reranking."""
    assert "rerank" in _rules(jobs) and not _rules(jobs) & {"train", "silver_labels", "prepare_dataset", "retrieve"}


def _check_learning_rate(jobs):
    """A learning rate: that entry's seeds retrain, and what reads them; the OC-SFT models do not."""
    trained = {w["model"] for r, w in jobs if r == "train"}
    assert "toy-first-s1" in trained and not trained & {"tiny-ocsft", "tiny-single-order"}, trained
    assert not _rules(jobs) & {"prepare_dataset", "silver_labels", "retrieve"}, _rules(jobs)


RERUNS = [
    ("nothing", None, lambda jobs: jobs == [] or pytest.fail(f"planned {jobs}")),
    ("keys-reversed", _reverse_keys, lambda jobs: jobs == [] or pytest.fail(f"planned {jobs}")),  # params are canonical
    ("new-experiment", _new_experiment, _check_new_experiment),
    ("relevant-grade", lambda c: c["reranking"].update(relevant_grade=1), _check_relevant_grade),
    ("bsc-k", lambda c: c["ocsft"].update(bsc_k=[1, 2]), _check_bsc_k),
    ("word-budget", lambda c: c["reranking"].update(word_budget=200), _check_word_budget),
    ("new-retriever", _new_retriever, _check_new_retriever),
    ("logging-steps", lambda c: c["training"]["toy-first"]["hyper"].update(logging_steps=7), _check_logging_steps),
    ("measures", lambda c: c["evaluation"].update(measures=["nDCG@10", "RR@10"]), _check_measures),
    ("window", lambda c: c["reranking"].update(window=15), _check_window),
    ("learning-rate", lambda c: c["training"]["toy-first"]["hyper"].update(learning_rate=1.0e-3), _check_learning_rate),
    ("gpus-0-to-1", lambda c: c["training"]["toy-first"].update(gpus=1),  # one process either way: no retraining
     lambda jobs: jobs == [] or pytest.fail(f"planned {jobs}")),
]


@pytest.mark.parametrize(("edit", "check"), [r[1:] for r in RERUNS], ids=[r[0] for r in RERUNS])
def test_a_config_edit_after_the_run_plans_exactly_what_reads_it(default_run, edit, check):
    """Config edits after a complete default run: each plans exactly the jobs that read what changed."""
    check(_plan(default_run.workdir, edit))


def test_the_report_stage_rebuilds_from_existing_results(default_run):
    """The report stage reruns its own jobs and nothing upstream."""
    out = snakemake(default_run.workdir, "--cores", "2", "report", "--forcerun", "paper_table", "paper_figure")
    assert out.returncode == 0, out.stderr[-3000:]
    reran = {line.split()[-1].rstrip(")") for line in out.stderr.splitlines() if line.startswith("Finished jobid")}
    assert reran <= {"paper_table", "paper_figure", "report"}, reran


def test_a_rerun_of_the_data_stage_gives_byte_identical_parquet(default_run):
    corpus = default_run.path("results", "data", "synthetic", "corpus.parquet")
    before = corpus.read_bytes()
    out = snakemake(default_run.workdir, "--cores", "2", "--forcerun", "prepare_dataset", "--until", "prepare_dataset")
    assert out.returncode == 0, out.stderr[-3000:]
    assert corpus.read_bytes() == before


def test_the_html_report_shows_every_registered_figure_in_a_browser(default_run):
    """Last, because it skips where chromium cannot be installed: the HTML report rendered in headless
    Chromium shows every registered figure with a real size."""
    from tests.browser import ensure_chromium, rendered_figures
    from tests.phases import phase

    workdir = default_run.workdir
    with phase("browser: the HTML report (install, render)"):
        out = snakemake(workdir, "--report", str(workdir / "report.html"))
        assert out.returncode == 0, out.stderr[-3000:]
        ensure_chromium()
        sizes = rendered_figures(workdir / "report.html", workdir / "report-screenshot.png")
    assert {"results/figures/position_curve.png", "results/figures/inference_vs_training.png",
            "results/figures/bsc_curve.png", "results/propensity/toy-first-s1/omega.png"} <= set(sizes)
    assert all(w > 100 and h > 100 for w, h in sizes.values()), sizes
    assert (workdir / "report-screenshot.png").stat().st_size > 10_000
