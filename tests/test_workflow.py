"""Integration tests that each need a workflow run of their own (lint, dry runs, small configs, the paper
presets' plans); the shared runs of whole configs are tests/test_run_*.py."""

from __future__ import annotations

import os
import re
import sys

import polars as pl
import pytest
import yaml

from posbias import dry_plan
from tests.conftest import REPO, snakemake

pytestmark = pytest.mark.workflow


def _write(workdir, cfg):
    path = workdir / "test-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_lint_is_clean():
    out = snakemake(REPO, "--lint")
    assert out.returncode == 0 and "Congratulations" in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_workflow_runs_as_a_snakemake_module_from_another_directory(tmp_path):
    """A user's own Snakefile elsewhere imports the workflow as a module (the Snakemake workflow catalog's
    usage): the whole default DAG plans, and a job runs its script from the module's directory."""
    import subprocess
    import sys

    (tmp_path / "Snakefile").write_text(
        f'configfile: "{REPO / "config" / "config.yaml"}"\n\n\n'
        f'module posbias:\n    snakefile:\n        "{REPO / "Snakefile"}"\n    config:\n        config\n\n\n'
        "use rule * from posbias\n")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)

    planned = run("-n")
    assert planned.returncode == 0, planned.stderr[-3000:]
    text = planned.stdout + planned.stderr  # (the datasets of files outside this directory are optional: dropped)
    for rule in ("train", "rerank", "paper_table"):
        assert re.search(rf"^{rule}\s+\d+\s*$", text, re.M), text[-2000:]
    ran = run("results/runs/toy/biased.parquet")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert pl.read_parquet(tmp_path / "results" / "runs" / "toy" / "biased.parquet").height > 0


def test_slurm_profile_plans_the_default_dag(workdir):
    out = snakemake(workdir, "-n", "--profile", str(REPO / "profiles" / "slurm"))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    for rule in ("prepare_dataset", "index", "retrieve", "evaluate_run", "retrieval_table"):
        assert rule in text
    assert "results/runs/synthetic/rrf.parquet" in text  # the fused run, a kind without an index


def _memory(value, attempt: int) -> int:
    """A profile's ``mem_mb`` as Snakemake evaluates it on the given attempt (its CLI-expression evaluator)."""
    from snakemake.resources import Resource

    return int(Resource.cli_evaluator("mem_mb", str(value), wildcards=None, input=None, attempt=attempt,
                                      async_run=None))


def test_a_job_killed_for_memory_is_retried_with_more_memory():
    """SLURM's OUT_OF_MEMORY (or the kernel's OOM killer) fails a job; where retries are configured
    (the slurm profile: 1, ``train``: 2), each attempt asks for its memory times the attempt: every
    ``mem_mb`` of both profiles, and of every rule."""
    workflow = yaml.safe_load((REPO / "profiles" / "default" / "config.v8+.yaml").read_text())
    user = yaml.safe_load((REPO / "profiles" / "slurm" / "config.v8+.yaml").read_text())
    memory = {rule: r["mem_mb"] for rule, r in workflow["set-resources"].items() if "mem_mb" in r}
    memory["default"] = user["default-resources"]["mem_mb"]
    assert user["retries"] >= 1 and len(memory) > 10
    for rule, value in memory.items():
        first = _memory(value, 1)
        assert first >= 2000 and [_memory(value, a) for a in (2, 3)] == [2 * first, 3 * first], (rule, value)
    rules = "".join(path.read_text() for path in sorted((REPO / "rules").glob("*.smk")))
    assert rules.count("mem_mb=") == len(re.findall(r"mem_mb=lambda w, attempt: \d+ \* attempt,", rules)) > 30


TOPICS, QRELS = "q1\talpha beta\nq2\tgamma\n", "q1 0 d1 1\nq2 0 d2 1\n"
# (edit, {file: new content}, rules the edit must plan, rules it must not): the rerun plan of file edits
FILE_EDITS = [
    ("nothing", {}, set(), {"prepare_texts", "prepare_qrels", "index", "retrieve", "evaluate_run"}),
    ("qrels-grade", {"qrels.txt": "q1 0 d1 2\nq2 0 d2 1\n"}, {"prepare_qrels", "evaluate_run"},
     {"prepare_texts", "index", "retrieve"}),
    ("qrels-blank-line-and-crlf", {"qrels.txt": QRELS.replace("\n", "\r\n") + "\n"}, set(),
     {"prepare_qrels", "prepare_texts", "index", "retrieve", "evaluate_run"}),
    ("topics-blank-line", {"topics.tsv": "\n" + TOPICS + "\n\n"}, set(),
     {"prepare_texts", "prepare_qrels", "index", "retrieve", "evaluate_run"}),
    ("topics-text", {"topics.tsv": "q1\talpha beta\nq2\tgamma delta\n"}, {"prepare_texts", "retrieve", "evaluate_run"},
     set()),
    ("corpus-text", {"corpus.tsv": "d1\talpha beta\nd2\tgamma delta\nd3\tzeta\n"}, {"prepare_texts", "index"}, set()),
]


@pytest.fixture(scope="module")
def edited_files_run(tmp_path_factory):
    """A finished data, retrieval and evaluation run of a TREC dataset from local files."""
    workdir = tmp_path_factory.mktemp("file-edits")
    (workdir / "in").mkdir()
    for name, text in {"topics.tsv": TOPICS, "qrels.txt": QRELS,
                       "corpus.tsv": "d1\talpha beta\nd2\tgamma delta\nd3\tepsilon\n"}.items():
        (workdir / "in" / name).write_text(text)
    cfg = {"datasets": {"mine": {"source": "trec", "topics": "in/topics.tsv", "qrels": "in/qrels.txt",
                                 "corpus": "in/corpus.tsv", "retrievers": ["bm25"]}},
           "retrievers": {"bm25": {"kind": "bm25"}}}
    config = _write(workdir, cfg)
    out = snakemake(workdir, "--cores", "2", "data", "retrieval", "evaluation", configfile=config)
    assert out.returncode == 0, out.stderr[-3000:]
    return workdir, config


@pytest.mark.parametrize(("edit", "files", "planned", "not_planned"), FILE_EDITS,
                         ids=[e[0] for e in FILE_EDITS])
def test_a_file_edit_reruns_exactly_what_reads_it(edited_files_run, edit, files, planned, not_planned):
    """Raw files are inputs: a grade reruns the qrels job and the evaluation, not the index or the run
    (the qrels are prepared apart from the texts); a blank line, CRLF line ends or a byte-order mark
    change nothing the readers read and rerun nothing (topics and qrels rerun by content); a topic
    text reruns the run."""
    workdir, config = edited_files_run
    before = {name: ((workdir / "in" / name).read_bytes(), (workdir / "in" / name).stat()) for name in files}
    try:
        for name, text in files.items():
            (workdir / "in" / name).write_text(text)
        out = snakemake(workdir, "-n", "data", "retrieval", "evaluation", configfile=config)
        assert out.returncode == 0, out.stderr[-3000:]
        rules = set(re.findall(r"^(?:local)?rule (\w+):$", out.stdout, re.M))
        assert planned <= rules and not rules & not_planned and (planned or not rules), (edit, rules)
    finally:  # the next edit starts from the finished run: the old bytes and time stamps
        for name, (data, stat) in before.items():
            (workdir / "in" / name).write_bytes(data)
            os.utime(workdir / "in" / name, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c["retrievers"]["bm25"].update(depht=10), "unknown key retrievers.bm25.depht (did you mean 'depth'?)"),
        (lambda c: c["datasets"].update(x={"source": "irds"}), "datasets.x is missing a required key"),
        (lambda c: c["datasets"]["synthetic"].update(retrievers=["bm26"]), "unknown retriever 'bm26'"),
    ],
)
def test_bad_config_is_one_clear_line(workdir, monkeypatch, mutate, expected):
    """The default config with one mistake, refused by the checks the Snakefile runs first (in process;
    tests/test_bad_input.py runs one case per kind of message through snakemake)."""
    from posbias import config as pbconfig

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    mutate(cfg)
    path = _write(workdir, cfg)
    monkeypatch.chdir(workdir)
    with pytest.raises(ValueError) as refused:
        pbconfig.load(path)
    assert expected in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


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


def _reranked_orders(preset: str) -> int:
    """The orders the rerank jobs of ``config/paper/<preset>.yaml`` rerank (config.rerank_batches), each once."""
    from posbias import config as pbconfig

    batches = pbconfig.rerank_batches(pbconfig.load(REPO / "config" / "paper" / f"{preset}.yaml", files=False))
    assert all(len(set(names)) == len(names) for names in batches.values())
    return sum(map(len, batches.values()))


def _plan_jobs(preset_plans, preset: str) -> dict[str, int]:
    """Jobs per rule family in the compute plan of a preset (posbias.plan, stand-in data)."""
    summary = preset_plans[preset][0]
    return dict(summary.group_by("family").agg(pl.col("jobs").sum()).iter_rows())


def test_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "debiasfirst")
    # the compute plan counts the jobs the DAG has
    assert _plan_jobs(preset_plans, "debiasfirst") == {k: counts[k] for k in ("rerank", "propensity_rerank", "train")}
    assert counts["train"] == 13  # every objective x augmentation cell (first among them) and the headline DebiasFirst
    assert counts["propensity_rerank"] == 1 and counts["augment"] == 3
    assert counts["combine_lists"] == 4 * 19  # PermSC@2 … @20 for First and DebiasFirst on DL19 and DL20
    assert counts["index"] == 3  # only the MS MARCO Contriever indexes: every other first stage is prebuilt
    assert _reranked_orders("debiasfirst") > 400 and counts["rerank_tables"] == 1
    assert counts["rerank"] * 10 <= _reranked_orders("debiasfirst")  # at least 10x fewer model loads than orders
    assert "rerank_order" not in counts  # the rules downstream read the orders in their batch folders
    # every paper table and figure its config fills (posbias.paper.scope): no CapCal experiment, so no CapCal table;
    # position orders, so every model's position curves (position_curve_all) beside DebiasFirst's Figure 4
    assert counts["paper_table"] == 5 and counts["paper_figure"] == 4


def test_capcal_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "capcal")
    assert _plan_jobs(preset_plans, "capcal") == {k: counts[k] for k in ("rerank", "train")}
    assert counts["train"] == 1  # the permutation-augmented fine-tuned model
    assert counts["combine_lists"] == 38  # PermSC@10, the comparison, on every decoding experiment
    # 52 experiments x 11 orders: 6 sweep the placeholder and alpha's constants (free, constrained, capcal with
    # the released code's constants, capcal@ours and 5 placeholders), 32 compare (free, constrained, capcal), 6
    # read the first token (none, capcal), 8 try other first stages (constrained without and with capcal, and free)
    assert _reranked_orders("capcal") == 11 * (6 * 9 + 32 * 3 + 6 * 2 + 8 * 3)
    assert counts["rerank"] == 6 * 9 + 32 * 3 + 6 * 2 + 8 * 3  # one model load reranks all 11 orders of a method
    # the ten benchmarks' prebuilt BM25; SPLADE++ on four general sets (prebuilt), Contriever on DBPedia and
    # Touché (prebuilt) and on DL19 and DL20 (MS MARCO's Contriever index, built by the DAG)
    assert counts["retrieve"] == 10 + 4 + 4 and counts["index"] == 2
    # no position orders and no evaluation.reference: no position-bias or versus-baselines table, no position curve
    assert counts["paper_table"] == 4 and counts["paper_figure"] == 2


def test_ocsft_paper_preset_plans_the_whole_dag(workdir, preset_plans):
    counts = _planned(workdir, "ocsft")
    assert _plan_jobs(preset_plans, "ocsft") == {k: counts[k] for k in ("rerank", "silver_labels", "pool_design", "train")}
    # passage reranking: ocsft and its four baselines, three seeds each; QA and response ranking: one seed;
    # single order on each of the two open teachers' labels (the teachers compared); OC-SFT on 1K queries'
    # labels (the label budget), the EMA mean teacher, marker-diverse SFT and OC-SFT with the marker penalty
    assert counts["train"] == 5 * 3 + 2 * 5 + 2 + 4
    # self-distilled on MS MARCO, NQ and UltraFeedback: first-stage order, and 10 shuffles for two baselines;
    # the two open teachers on MS MARCO: first-stage order (the student's targets) and 10 shuffles (silver-β)
    assert counts["silver_labels"] == 3 * 2 + 2 * 2
    # experiments: 16 scorers (the base model, 5 variants x 3 seeds) on DL19, DL20 and the 14 further
    # collections; the two teachers' students on DL19, DL20; 6 on QA and on response ranking; and the base
    # model's five prompt-side alternatives (CapCal on its Grades readout among them) on DL19, DL20; on DL19
    # and DL20 the marker probe of OC-SFT's 3 seeds, the 1K-label and EMA OC-SFT, both marker variants (plain, probed),
    # and the skeleton probe of OC-SFT's 3 seeds and the base model
    assert counts["stability"] == 16 * 16 + 2 * 2 + 2 * 6 + 2 * 5 + 2 * (3 + 2 + 2 * 2) + 2 * (3 + 1) and counts["stability_table"] == 1
    # DL19 and DL20: 100 shuffles and 20 positions; the 14 further collections: M = 10 shuffles; QA and
    # response ranking over 100 shuffles; the prompt-side alternatives over the original and shuffled orders;
    # the teachers' students, the 1K-label and EMA OC-SFT and the marker variants over M = 10 shuffles; OC-SFT's marker
    # probe, and its and the base model's skeleton probe, over the original and shuffled orders
    assert _reranked_orders("ocsft") == (2 * 16 * (1 + 100 + 20) + 14 * 16 * (1 + 10) + 2 * 6 * (1 + 100) + 2 * 5 * 101
                                     + 2 * 2 * 11 + 2 * (2 + 2 * 2) * 11 + 2 * (3 + 3 + 1) * 101)
    # per experiment, one model load per 25 orders: 101 original and shuffled orders in 5, 20 positions in 1
    assert counts["rerank"] == 2 * 16 * (5 + 1) + 14 * 16 + 2 * 6 * 5 + 2 * 5 * 5 + 2 * 2 + 2 * (2 + 2 * 2) + 2 * (3 + 3 + 1) * 5
    assert counts["decisions"] == 12 and counts["decisions_table"] == 1 and counts["answers"] == 1
    # prebuilt BM25 on NQ and on the 14 further collections, UltraFeedback's lists
    assert counts["retrieve"] == 2 + 14 + 2
    trained = {m: calls for f, m, calls in preset_plans["ocsft"][0].select("family", "model", "calls").iter_rows()
               if f == "train"}
    assert trained["ocsft_1k-s1"] == pytest.approx(trained["ocsft-s1"] / 30, rel=0.02)  # 1K of 30K queries' windows
    assert counts["pool_design"] == 2 * 22 and counts["pool_figures"] == 1  # every pointwise scorer on DL19 and DL20
    # no listwise-trained model and no evaluation.reference beside a baseline: no ablations or versus-baselines;
    # position orders, so position_curve_all
    assert counts["paper_table"] == 4 and counts["paper_figure"] == 3


def test_the_docs_show_the_current_presets_plans(preset_plans):
    """docs/presets.md's plan table is what `python -m posbias.dry_plan --readme` writes for today's presets."""
    block = dry_plan.readme_block(preset_plans)
    readme = (REPO / "docs" / "presets.md").read_text()
    start, end = readme.index(dry_plan.README_START), readme.index(dry_plan.README_END)
    assert readme[start:end + len(dry_plan.README_END)] == block, \
        "run: python -m posbias.dry_plan --readme docs/presets.md config/paper/*.yaml"
    totals = {m.group(1): int(m.group(2).replace(",", "")) for m in re.finditer(r"\| (\w+) \| all \| ([\d,]+) \|", block)}
    assert set(totals) == {"capcal", "debiasfirst", "ocsft"} and all(v > 0 for v in totals.values())


def test_the_job_plan_bench_counts_a_configs_jobs(capsys, monkeypatch):
    """bench/job_plan.py (jobs, sbatch jobs and model loads of a dry run; the dry-run seconds issue 55 targets) runs:
    the quick start plans local table jobs beside its sbatch jobs, and its two rerank jobs load a model each."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("job_plan", REPO / "bench" / "job_plan.py")
    job_plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job_plan)
    monkeypatch.setattr(sys, "argv", ["job_plan.py", str(REPO / "config" / "examples" / "quickstart.yaml")])
    job_plan.main()
    fields = dict(kv.split("=") for kv in capsys.readouterr().out.split(": ", 1)[1].split())
    assert 0 < int(fields["sbatch"]) < int(fields["jobs"]), fields
    assert int(fields["rerank"]) >= 1 and int(fields["model_loads"]) >= int(fields["rerank"]), fields


def test_a_worker_leaves_the_first_runs_module_its_priority_and_lowers_it_for_the_others():
    """tests/runs.py: on an xdist worker the default run's module keeps the process's CPU priority and any other
    module lowers it to runs.NICE, once (what the process starts inherits it)."""
    import subprocess

    code = """
import os, types
os.environ["PYTEST_XDIST_WORKER"] = "gw1"
from tests import runs
runs._CRITICAL.add("tests.test_run_default")
for name in ("tests.test_run_default", "tests.test_paper", "tests.test_config"):
    runs.pytest_runtest_setup(types.SimpleNamespace(module=types.SimpleNamespace(__name__=name)))
    print(os.nice(0))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    from tests.runs import NICE

    base = os.nice(0)
    assert [int(v) for v in out.stdout.split()] == [base, max(base, NICE), max(base, NICE)]
