"""The published studies (docs/results/real-llms-first and -gemma3, written by ``python -m posbias.publish``): their
files are the ones their manifests hashed, they name commits of this repository, and the README shows their
numbers side by side. CI's rerun of a slice of the SmolLM2 study is in tests/test_run_default.py."""

from __future__ import annotations

import hashlib
import json
import subprocess

import polars as pl
import pytest
import yaml

from posbias import publish
from tests.conftest import REPO

RESULTS = REPO / "docs" / "results"
STUDY = RESULTS / "real-llms-first"  # SmolLM2-135M-Instruct: the default run reruns a slice of it
# Each published study's folder and the config it ran, in the README table's column order
STUDIES = {"real-llms-first": "real-llms-first.yaml", "real-llms-first-gemma3": "real-llms-first-gemma3.yaml"}
# The second stage (SmolLM2's other readers and DL20), its table in docs/results.md: one column per reader
MODES = "real-llms-modes"
MODES_GEMMA = "real-llms-modes-gemma3"  # the same design on Gemma-3-270M, its own table in docs/results.md
# The third stage (the Grades scorer on both models), its table in docs/results.md: one column per model
GRADES = "real-llms-grades"
# The fine-tuning study (tests/test_real_finetune.py reruns its slice), its table in docs/results.md
FINETUNE = "real-finetune"
# The fourth stage (number identifiers, slot rotation, CapCal on the Grades slots), its table in docs/results.md
SLOTS = "real-llms-slots"
# The fifth stage (PermSC for K = 1 … 10 over 10 shuffles, both models), its table in docs/results.md
PERMSC = "real-llms-permsc"
# OC-SFT's claim at toy scale (tests/test_run_ocsft_toy.py checks its claims and reruns its slice)
OCSFT_TOY = "ocsft-toy"
PUBLISHED = {**STUDIES, MODES: "real-llms-modes.yaml", MODES_GEMMA: "real-llms-modes-gemma3.yaml",
             GRADES: "real-llms-grades.yaml", SLOTS: "real-llms-slots.yaml", PERMSC: "real-llms-permsc.yaml",
             FINETUNE: "real-finetune.yaml", OCSFT_TOY: "ocsft-toy.yaml"}


@pytest.mark.parametrize("study", PUBLISHED)
def test_the_published_files_are_those_the_manifest_hashed(study):
    folder = RESULTS / study
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} - {"MANIFEST.json", "README.md"}
    assert set(manifest["files"]) == on_disk
    changed = [name for name, digest in manifest["files"].items()
               if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest]
    assert not changed, f"edited after publishing (publish again instead): {changed}"
    assert (folder / "config.yaml").read_text() == (REPO / "config" / "examples" / PUBLISHED[study]).read_text()


@pytest.mark.parametrize("study", PUBLISHED)
def test_the_study_was_run_by_a_commit_of_this_repository(study):
    commit = json.loads((RESULTS / study / "MANIFEST.json").read_text())["git_commit"]
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "--git-dir"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True)
    assert found.returncode == 0, f"{commit} is not an ancestor of HEAD"


def study_cells(folder) -> list[tuple[str, str]]:
    """One published study's column of the README table: (row label, cell), as its tables give them."""
    rerank = {r["debias"]: r for r in pl.read_csv(folder / "tables" / "rerank.csv").to_dicts()}
    claims = {r["claim"]: r for r in pl.read_csv(folder / "tables" / "claims.csv").to_dicts()}
    plain = rerank["none"]

    def claim(name: str) -> str:
        r = claims[name]
        return f"{r['mark']} (effect {r['effect']:+.3f}, d_z {r['d_z']:+.2f}, p = {r['p']:.2g}, {r['queries']} q.)"

    def capcal(name: str) -> str:
        r = rerank[name]
        return (f"{r['ndcg10_original']:.3f}; {r['ndcg10_shuffled_mean']:.3f} ± {r['ndcg10_shuffled_sd']:.3f} "
                f"(α {r['capcal_alpha_mean']:.2f}, at the cap {r['capcal_at_cap']:.0%})")

    return [
        ("nDCG@10, first-stage order", f"{plain['ndcg10_original']:.3f}"),
        ("nDCG@10, 3 shuffled orders (mean ± sd over orders)",
         f"{plain['ndcg10_shuffled_mean']:.3f} ± {plain['ndcg10_shuffled_sd']:.3f}"),
        ("τ-PSI over the shuffles", f"{plain['tau_psi']:.3f}"),
        ("nDCG@10 of the relevant passage at input position 1 / 20; spread over 1, 10, 20 (PSI)",
         f"{plain['curve_first']:.3f} / {plain['curve_last']:.3f}; {plain['curve_spread']:.3f} ({plain['psi']:.3f})"),
        ("PermSC@2, PermSC@3 (nDCG@10)",
         f"{rerank['permsc@2']['ndcg10_original']:.3f}, {rerank['permsc@3']['ndcg10_original']:.3f}"),
        ("CapCal, c = α_max = 1 (ours): first-stage order; shuffled", capcal("capcal")),
        ("CapCal, c = 5, α_max = 2 (released code): first-stage order; shuffled", capcal("capcal@released")),
        *((f"claim: {name}", claim(name)) for name in sorted(claims)),
    ]


def study_readme_rows() -> list[str]:
    """The README's study table: one row per label, one column per published study (:data:`STUDIES`)."""
    columns = [study_cells(RESULTS / study) for study in STUDIES]
    labels = [label for label, _ in columns[0]]
    assert all([label for label, _ in c] == labels for c in columns), "the studies' tables differ in their rows"
    return [f"| {label} | " + " | ".join(c[i][1] for c in columns) + " |" for i, label in enumerate(labels)]


def test_the_readme_shows_the_published_studys_numbers():
    readme = (REPO / "README.md").read_text()
    missing = [row for row in study_readme_rows() if row not in readme]
    assert not missing, "README.md's study table is not the published one; it gives:\n" + "\n".join(missing)


def number(value, digits: int = 3) -> str:
    """A table cell: the value to ``digits`` places, or "–" where it is missing (None or NaN)."""
    return "–" if value is None or value != value else f"{value:.{digits}f}"


def pvalue(p) -> str:
    """A p value to two significant digits, or "–"."""
    return "–" if p is None or p != p else f"{p:.2g}"


def spread(mean, sd) -> str:
    """A mean ± sd cell; the mean alone where there is no sd (one seed)."""
    return number(mean) if sd is None or sd != sd else f"{number(mean)} ± {number(sd)}"


def modes_rows(study: str = MODES, model: str = "SmolLM2-135M-Instruct") -> list[str]:
    """docs/results.md's table of the second stage on ``model`` (the study folder ``study``): one column per
    (reader, collection) it ran, in its config's order, with the same rows as far as each reader's orders give them
    ("–" where they do not)."""
    folder = RESULTS / study
    rerank = pl.read_csv(folder / "tables" / "rerank.csv")
    claims = {(r["model"], r["dataset"], r["claim"]): r for r in pl.read_csv(folder / "tables" / "claims.csv").to_dicts()}
    config = yaml.safe_load((folder / "config.yaml").read_text())
    columns = [(e["model"], e["dataset"]) for e in config["reranking"]["experiments"]]  # the config's order
    modes = {name: spec.get("mode", "first") for name, spec in config["models"].items()}
    cells = {(r["model"], r["dataset"], r["debias"]): r for r in rerank.to_dicts()}

    def claim(model, dataset, name) -> str:
        r = claims.get((model, dataset, name))
        if r is None or r["mark"] == "not run":
            return "not run"
        return f"{r['mark']} ({r['effect']:+.3f}, p = {r['p']:.2g})"

    def row(label, cell) -> str:
        return f"| {label} | " + " | ".join(cell(m, d) for m, d in columns) + " |"

    def plain(model, dataset):
        return cells[(model, dataset, "none")]

    return [
        f"| {model} | " + " | ".join(f"{modes[m]} · {d.upper()}" for m, d in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("queries", lambda m, d: str(plain(m, d)["queries"])),
        row("nDCG@10, first-stage order", lambda m, d: number(plain(m, d)["ndcg10_original"])),
        row("nDCG@10, 3 shuffled orders (mean ± sd)",
            lambda m, d: f"{number(plain(m, d)['ndcg10_shuffled_mean'])} ± {number(plain(m, d)['ndcg10_shuffled_sd'])}"),
        row("τ-PSI over the shuffles", lambda m, d: number(plain(m, d)["tau_psi"])),
        row("relevant passage at input position 1 / 20 (nDCG@10); PSI",
            lambda m, d: "–" if plain(m, d)["curve_first"] is None or plain(m, d)["curve_first"] != plain(m, d)["curve_first"]
            else f"{number(plain(m, d)['curve_first'])} / {number(plain(m, d)['curve_last'])}; {number(plain(m, d)['psi'])}"),
        row("PermSC@3 (nDCG@10)", lambda m, d: number(cells[(m, d, "permsc@3")]["ndcg10_original"])
            if (m, d, "permsc@3") in cells else "–"),
        row("model calls per query (plain)", lambda m, d: number(plain(m, d)["calls_per_query"], 1)),
        *(row(f"claim: {name}", lambda m, d, name=name: claim(m, d, name))
          for name in ("shuffling-lowers-quality", "late-positions-lose", "permsc-beats-one-list")),
    ]


@pytest.mark.parametrize(("study", "model"), [(MODES, "SmolLM2-135M-Instruct"), (MODES_GEMMA, "Gemma-3-270M (base)")])
def test_the_results_page_shows_the_second_stages_numbers(study, model):
    page = (REPO / "docs" / "results.md").read_text()
    missing = [row for row in modes_rows(study, model) if row not in page]
    assert not missing, f"docs/results.md's second-stage table of {model} is not the published one; it gives:\n" + \
        "\n".join(missing)


def claim_cell(r: dict) -> str:
    """A claims.csv row as the results page writes it: its mark, effect and p, or "not run"."""
    return "not run" if r["mark"] == "not run" else f"{r['mark']} ({r['effect']:+.3f}, p = {r['p']:.2g})"


def grades_rows() -> list[str]:
    """docs/results.md's table of the third stage: one column per model in its config's order; the rerank table's
    plain rows, the stability table's K = 1 (retention) and BSC@K rows, and the claims."""
    folder = RESULTS / GRADES
    config = yaml.safe_load((folder / "config.yaml").read_text())
    columns = [e["model"] for e in config["reranking"]["experiments"]]
    plain = {r["model"]: r for r in pl.read_csv(folder / "tables" / "rerank.csv").filter(
        pl.col("debias") == "none").to_dicts()}
    stability = {(r["variant"], r["k"]): r for r in pl.read_csv(folder / "tables" / "stability.csv").filter(
        pl.col("budget") == "fixed").to_dicts()}
    claims = {(r["model"], r["claim"]): r for r in pl.read_csv(folder / "tables" / "claims.csv").to_dicts()}

    def row(label, cell) -> str:
        return f"| {label} | " + " | ".join(cell(m) for m in columns) + " |"

    def claim(model, name) -> str:
        return claim_cell(claims[(model, name)])

    names = {"smollm2": "SmolLM2-135M-Instruct", "gemma3": "Gemma-3-270M (base)"}
    return [
        "| Grades scorer, DL19 | " + " | ".join(names[m] for m in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("queries", lambda m: str(plain[m]["queries"])),
        row("nDCG@10, first-stage order", lambda m: number(plain[m]["ndcg10_original"])),
        row("nDCG@10, 3 shuffled orders (mean ± sd)",
            lambda m: f"{number(plain[m]['ndcg10_shuffled_mean'])} ± {number(plain[m]['ndcg10_shuffled_sd'])}"),
        row("τ-PSI over the shuffles", lambda m: number(plain[m]["tau_psi"])),
        row("relevant passage at input position 1 / 20 (nDCG@10); PSI",
            lambda m: f"{number(plain[m]['curve_first'])} / {number(plain[m]['curve_last'])}; {number(plain[m]['psi'])}"),
        row("retention Jaccard (set-F1 at its threshold τ*)",
            lambda m: f"{number(stability[(m, 1)]['jaccard'])} ({number(stability[(m, 1)]['f1'])})"),
        row("BSC@2, BSC@3 (nDCG@10 over shuffles)",
            lambda m: f"{number(stability[(m, 2)]['ndcg10'])}, {number(stability[(m, 3)]['ndcg10'])}"),
        row("seconds per query (one window of 20)", lambda m: number(plain[m]["seconds_per_query"], 1)),
        *(row(f"claim: {name}", lambda m, name=name: claim(m, name))
          for name in ("shuffling-lowers-quality", "late-positions-lose")),
    ]




# The fourth stage's readers, in its table's order: (its models entry minus the model's name, debias) and the label
SLOT_READERS = {("", "none"): "FIRST, letters", ("", "roundrobin@2"): "FIRST, letters, slot rotation ×2",
                ("-numbers", "none"): "FIRST, numbers", ("-grades", "none"): "Grades",
                ("-grades", "capcal@exact"): "Grades, CapCal on its slots (α = 1)"}


def slots_rows() -> list[str]:
    """docs/results.md's table of the fourth stage: one row per model and reader (:data:`SLOT_READERS`), the rerank
    table's columns and the claims of the reader's experiment (a debiased row has none of its own: "–")."""
    folder = RESULTS / SLOTS
    cells = {(r["model"], r["debias"]): r for r in pl.read_csv(folder / "tables" / "rerank.csv").to_dicts()}
    claims = {(r["model"], r["claim"]): r for r in pl.read_csv(folder / "tables" / "claims.csv").to_dicts()}
    names = {"smollm2": "SmolLM2-135M-Instruct", "gemma3": "Gemma-3-270M (base)"}

    def claim(model, debias, name) -> str:
        r = claims.get((model, name))
        if debias != "none" or r is None or r["mark"] == "not run":
            return "–"
        return f"{r['mark']} ({r['effect']:+.3f}, p = {r['p']:.2g})"

    rows = ["| DL19, 10 queries | reader | nDCG@10 original | nDCG@10 3 shuffles (mean ± sd) | τ-PSI | relevant passage "
            "at input position 1 / 20 (nDCG@10); PSI | model calls per query | seconds per query | claim: "
            "shuffling-lowers-quality | claim: late-positions-lose |", "|---|---|---|---|---|---|---|---|---|---|"]
    for base, name in names.items():
        for (suffix, debias), label in SLOT_READERS.items():
            model = base + suffix
            r = cells[(model, debias)]
            curve = "–" if r["curve_first"] != r["curve_first"] else (
                f"{number(r['curve_first'])} / {number(r['curve_last'])}; {number(r['psi'])}")
            rows.append(f"| {name} | {label} | {number(r['ndcg10_original'])} | "
                        f"{number(r['ndcg10_shuffled_mean'])} ± {number(r['ndcg10_shuffled_sd'])} | {number(r['tau_psi'])} | "
                        f"{curve} | {number(r['calls_per_query'], 1)} | {number(r['seconds_per_query'], 1)} | "
                        f"{claim(model, debias, 'shuffling-lowers-quality')} | "
                        f"{claim(model, debias, 'late-positions-lose')} |")
    return rows


def test_the_results_page_shows_the_fourth_stages_numbers():
    page = (REPO / "docs" / "results.md").read_text()
    missing = [row for row in slots_rows() if row not in page]
    assert not missing, "docs/results.md's fourth-stage table is not the published one; it gives:\n" + "\n".join(
        slots_rows())


def test_the_fourth_stages_plain_readings_are_the_earlier_stages_cells():
    """The fourth stage reran the letters' and the Grades scorer's plain readings (same seed, orders, word budget and
    queries): every per-query value must equal the first stage's (letters, both models) and the third stage's
    (Grades), published from other runs at other commits, so the stages are one study."""
    slots = pl.read_csv(RESULTS / SLOTS / publish.PER_QUERY).filter(pl.col("debias") == "none")
    earlier = {("smollm2", "real-llms-first", "smollm2"), ("gemma3", "real-llms-first-gemma3", "gemma3"),
               ("smollm2-grades", GRADES, "smollm2"), ("gemma3-grades", GRADES, "gemma3")}
    for model, study, theirs in sorted(earlier):
        mine = slots.filter(pl.col("model") == model).drop("model")
        other = pl.read_csv(RESULTS / study / publish.PER_QUERY).filter(
            (pl.col("model") == theirs) & (pl.col("debias") == "none")).drop("model")
        joined = mine.join(other, on=["dataset", "retriever", "order", "debias", "query_id", "measure"], how="left")
        assert joined.height == mine.height > 0 and joined["value_right"].null_count() == 0, (model, study)
        worst = (joined["value"] - joined["value_right"]).abs().max()
        assert worst < 1e-9, f"{model}: differs from {study}'s {theirs} by up to {worst}"


PERMSC_KS = (1, 2, 3, 4, 5)  # the K with at least two presentations of 10 shuffles (τ-PSI needs two)
PERMSC_LISTS = tuple(range(2, 11))  # the list-level permsc@K the config lists


def permsc_rows() -> list[str]:
    """docs/results.md's table of the fifth stage: one column per model; the rerank table's plain and list-level
    PermSC rows, the frontier's PermSC@K rows over disjoint groups of K shuffles, and the claims."""
    folder = RESULTS / PERMSC
    config = yaml.safe_load((folder / "config.yaml").read_text())
    columns = [e["model"] for e in config["reranking"]["experiments"]]
    rerank = {(r["model"], r["debias"]): r for r in pl.read_csv(folder / "tables" / "rerank.csv").to_dicts()}
    frontier = {(r["variant"], r["k"]): r for r in pl.read_csv(folder / "tables" / "frontier.csv").filter(
        (pl.col("budget") == "fixed") & pl.col("method").is_in(["none", *(f"permsc@{k}" for k in PERMSC_KS)])).to_dicts()}
    claims = {(r["model"], r["claim"]): r for r in pl.read_csv(folder / "tables" / "claims.csv").to_dicts()}
    names = {"smollm2": "SmolLM2-135M-Instruct", "gemma3": "Gemma-3-270M (base)"}

    def row(label, cell) -> str:
        return f"| {label} | " + " | ".join(cell(m) for m in columns) + " |"

    def claim(model, name) -> str:
        return claim_cell(claims[(model, name)])

    def over_k(model, column) -> str:
        return ", ".join(number(frontier[(model, k)][column]) for k in PERMSC_KS)

    return [
        "| DL19, BM25 top 20, 43 queries, FIRST (letters) | " + " | ".join(names[m] for m in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("nDCG@10, first-stage order", lambda m: number(rerank[(m, "none")]["ndcg10_original"])),
        row("nDCG@10, 10 shuffled orders (mean ± sd over orders)",
            lambda m: spread(rerank[(m, "none")]["ndcg10_shuffled_mean"], rerank[(m, "none")]["ndcg10_shuffled_sd"])),
        row("τ-PSI over the 10 shuffles", lambda m: number(rerank[(m, "none")]["tau_psi"])),
        row("PermSC@K, K = 1 … 5 (10, 5, 3, 2, 2 presentations): nDCG@10", lambda m: over_k(m, "ndcg10")),
        row("PermSC@K, K = 1 … 5: τ-PSI over the presentations", lambda m: over_k(m, "tau_psi")),
        row("PermSC@K, K = 1 … 5: retention Jaccard", lambda m: over_k(m, "jaccard")),
        row("PermSC of the first K shuffles, K = 2 … 10 (nDCG@10)",
            lambda m: ", ".join(number(rerank[(m, f"permsc@{k}")]["ndcg10_original"]) for k in PERMSC_LISTS)),
        *(row(f"claim: {name}", lambda m, name=name: claim(m, name))
          for name in ("shuffling-lowers-quality", "permsc-beats-one-list")),
    ]


@pytest.mark.parametrize(("stage", "rows"), [("third", grades_rows), ("fifth", permsc_rows)])
def test_the_results_page_shows_a_stages_numbers(stage, rows):
    page = (REPO / "docs" / "results.md").read_text()
    missing = [row for row in rows() if row not in page]
    assert not missing, f"docs/results.md's {stage}-stage table is not the published one; it gives:\n" + "\n".join(
        rows())


def test_the_fifth_stages_shared_orders_are_the_first_stages_cells():
    """The fifth stage's first-stage order and its first three shuffles are the first stage's (the orders' seeds do
    not depend on how many shuffles a run has), read by another engine (transformers there, vLLM in the first
    stage) at another commit: every per-query value of the plain reading must equal the first stage's."""
    fifth = pl.read_csv(RESULTS / PERMSC / publish.PER_QUERY).filter(
        (pl.col("debias") == "none") & pl.col("order").is_in(["original", "shuffled-0", "shuffled-1", "shuffled-2"]))
    for model, study in (("smollm2", "real-llms-first"), ("gemma3", "real-llms-first-gemma3")):
        mine = fifth.filter(pl.col("model") == model)
        other = pl.read_csv(RESULTS / study / publish.PER_QUERY).filter(pl.col("debias") == "none")
        joined = mine.join(other, on=["model", "dataset", "retriever", "order", "debias", "query_id", "measure"],
                           how="left")
        assert joined.height == mine.height == 4 * 43 * 3 and joined["value_right"].null_count() == 0, model
        worst = (joined["value"] - joined["value_right"]).abs().max()
        assert worst < 1e-9, f"{model}: differs from {study} by up to {worst}"


def finetune_rows() -> list[str]:
    """docs/results.md's two tables of the fine-tuning study, from its published tables: the FIRST readers (the base
    model and each trained cell: mean ± sd over seeds where it has two) and the Grades readers (the stability
    table: OC-SFT, its baselines and the base scorer). p: the run's paired Wilcoxon tests against DebiasFirst
    (versus_baselines, Holm-corrected) and against OC-SFT (stability)."""
    from posbias.paper.stats import mean_sd

    folder = RESULTS / FINETUNE
    bias = {r["model"]: r for r in pl.read_csv(folder / "tables" / "position_bias.csv").to_dicts()}
    rerank = pl.read_csv(folder / "tables" / "rerank.csv")
    versus = {(r["model"], r["condition"]): r for r in pl.read_csv(folder / "tables" / "versus_baselines.csv").to_dicts()}
    stability = {r["variant"]: r for r in pl.read_csv(folder / "tables" / "stability.csv").filter(
        (pl.col("k") == 1) & (pl.col("budget") == "fixed")).to_dicts()}

    def seeds_of(model: str, debias: str, column: str) -> str:
        """The rerank table's per-seed values of ``model`` (its seeds are models ``<model>-s<seed>``)."""
        values = rerank.filter(((pl.col("model") == model) | pl.col("model").str.contains(f"^{model}-s[0-9]+$"))
                               & (pl.col("debias") == debias))[column].to_list()
        return spread(*mean_sd(values)) if values else "–"

    def p(model: str, condition: str) -> str:
        r = versus.get((model, condition))
        return "ref." if model == "debiasfirst" else "–" if r is None else number(r["p_holm"], 3)

    listwise = ["smollm2", "first", "debiasfirst", "randaug", "posaug-noips"]
    rows = ["| FIRST reader (DL19, 10 queries) | seeds | nDCG@10 original | nDCG@10 3 shuffles | τ-PSI | curve spread "
            "(position 1 → 20) | PermSC@3 | CapCal (original) | p vs DebiasFirst (original; shuffled) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for model in listwise:
        b = bias[model]
        rows.append(f"| {model} | {b['seeds']} | {spread(b['ndcg10_original'], b['ndcg10_original_sd'])} | "
                    f"{spread(b['ndcg10_shuffled'], b['ndcg10_shuffled_sd'])} | {seeds_of(model, 'none', 'tau_psi')} | "
                    f"{spread(b['spread'], b['spread_sd'])} | {seeds_of(model, 'permsc@3', 'ndcg10_original')} | "
                    f"{seeds_of(model, 'capcal', 'ndcg10_original')} | {p(model, 'original')}; {p(model, 'shuffled')} |")
    rows += ["", "| Grades reader (DL19, 10 queries) | nDCG@10 original | nDCG@10 2 shuffles | τ-PSI | retention Jaccard "
             "| p vs OC-SFT (nDCG@10 shuffled; τ-PSI; Jaccard) |", "|---|---|---|---|---|---|"]
    for model in ("smollm2-grades", "single-order", "order-averaged", "ocsft"):
        s = stability[model]
        tests = "ref." if model == "ocsft" else "; ".join(number(s[f"p_holm_{c}"]) for c in ("ndcg10", "tau_psi",
                                                                                               "jaccard"))
        rows.append(f"| {model} | {number(s['ndcg10_canonical'])} | {number(s['ndcg10'])} | {number(s['tau_psi'])} | "
                    f"{number(s['jaccard'])} | {tests} |")
    return rows


def test_the_results_page_shows_the_fine_tuning_studys_numbers():
    page = (REPO / "docs" / "results.md").read_text()
    missing = [row for row in finetune_rows() if row and row not in page]
    assert not missing, "docs/results.md's fine-tuning tables are not the published ones; they give:\n" + "\n".join(
        finetune_rows())


def test_the_readme_states_the_fine_tuning_studys_numbers():
    """The README's sentence on the fine-tuning study: First's and DebiasFirst's curve spread and nDCG@10 in the
    original order (mean over seeds), as the published position-bias table gives them."""
    bias = {r["model"]: r for r in pl.read_csv(RESULTS / FINETUNE / "tables" / "position_bias.csv").to_dicts()}
    first, debiased = bias["first"], bias["debiasfirst"]
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"spread {first['spread']:.2f} → {debiased['spread']:.2f}" in readme
    assert f"nDCG@10 {first['ndcg10_original']:.2f} → {debiased['ndcg10_original']:.2f}" in readme


def ocsft_toy_rows() -> list[str]:
    """docs/results.md's two tables of the OC-SFT toy study: the stability table's K = 1 rows on the toy test set
    (OC-SFT, its four baselines, the teacher and the base grader; mean ± sd over seeds, p: Holm-corrected paired
    Wilcoxon tests against OC-SFT) and the consumers table."""
    folder = RESULTS / OCSFT_TOY
    stability = {r["variant"]: r for r in pl.read_csv(folder / "tables" / "stability.csv").filter(
        (pl.col("k") == 1) & (pl.col("budget") == "fixed") & (pl.col("dataset") == "toy")).to_dicts()}
    rows = ["| variant (toy, 50 queries, 6 shuffles) | seeds | nDCG@10 over shuffles | τ-PSI | retention Jaccard | "
            "p vs OC-SFT (τ-PSI; Jaccard) |", "|---|---|---|---|---|---|"]
    for variant in ("toy-ocsft", "toy-single-order", "toy-order-averaged", "toy-perm-aug", "toy-debiasfirst-pointwise",
                    "slot-teacher", "toy-grader"):
        r = stability[variant]
        tests = "ref." if variant == "toy-ocsft" else f"{pvalue(r['p_holm_tau_psi'])}; {pvalue(r['p_holm_jaccard'])}"
        rows.append(f"| {variant} | {r['seeds']} | {spread(r['ndcg10'], r['ndcg10_sd'])} | "
                    f"{spread(r['tau_psi'], r['tau_psi_sd'])} | {spread(r['jaccard'], r['jaccard_sd'])} | {tests} |")
    rows += ["", "| consumer | variant | seeds | quality | flip across presentations | p vs OC-SFT (flip) |",
             "|---|---|---|---|---|---|"]
    for r in pl.read_csv(folder / "tables" / "consumers.csv").to_dicts():
        tests = "ref." if r["variant"].endswith("-ocsft") else pvalue(r["p_holm_flip"])
        rows.append(f"| {r['consumer']} | {r['variant']} | {r['seeds']} | {spread(r['quality'], r['quality_sd'])} | "
                    f"{spread(r['flip'], r['flip_sd'])} | {tests} |")
    return rows


def test_the_results_page_shows_the_ocsft_toy_studys_numbers():
    page = (REPO / "docs" / "results.md").read_text()
    missing = [row for row in ocsft_toy_rows() if row and row not in page]
    assert not missing, "docs/results.md's OC-SFT toy tables are not the published ones; they give:\n" + "\n".join(
        ocsft_toy_rows())
