"""docs/fidelity.md against the papers and the presets: every row quotes the papers' own words (or
says `paper: silent` / `reading:`), and every row that names a preset, a config key and a value is
checked against the preset file, so neither can drift alone."""

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

from posbias import methods

REPO = Path(__file__).resolve().parents[1]
PAPERS = REPO.parent / "shared" / "papers"
ROW = re.compile(r"^\|(?P<quote>[^|]+)\|(?P<statement>[^|]+)\|\s*(?P<preset>\w+)\s*\|\s*`(?P<key>[^`]+)`\s*\|\s*"
                 r"(?P<value>[^|]+?)\s*\|")
EXEMPT = re.compile(r"paper: *silent|reading:", re.IGNORECASE)


def _preset(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / "paper" / f"{name}.yaml").read_text())


def _pinned_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (REPO / "docs" / "fidelity.md").read_text().splitlines():
        match = ROW.match(line)
        if match and match["preset"] != "–" and not match["value"].startswith(("(", "–")):
            rows.append((match["preset"], match["key"], match["value"], match["statement"].strip()))
    return rows


def _normalised(text: str) -> str:
    """NFKC, no whitespace, lower case: a quote survives line wrapping and full-width punctuation."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).lower()


def _quoted_rows() -> list[tuple[int, str]]:
    """(line, quote) of every data row of the page's tables (the quote is each table's first column)."""
    rows, header = [], None
    for number, line in enumerate((REPO / "docs" / "fidelity.md").read_text().splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            assert header[0] == "quote", f"docs/fidelity.md:{number}: a table's first column must be 'quote'"
        elif not set(line) <= set("|-: "):
            rows.append((number, cells[0]))
    return rows


def test_every_fidelity_row_quotes_the_papers_or_says_it_is_silent():
    """Each quote (its parts split at '…' / '...') is a verbatim span of a paper text in ../shared/papers;
    a row the papers do not state says `paper: silent` or `reading:` instead."""
    if not PAPERS.is_dir():
        pytest.skip(f"the papers' texts are not at {PAPERS} (CI has them beside the clone)")
    papers = _normalised("".join(p.read_text() for p in sorted(PAPERS.glob("*.txt"))))
    rows = _quoted_rows()
    assert len(rows) >= 100
    missing = []
    for number, quote in rows:
        if EXEMPT.search(quote):
            continue
        parts = [part for part in re.split(r"\.\.\.|…", quote.strip("`\"'“” ")) if part.strip()]
        if not parts or not all(_normalised(part) in papers for part in parts):
            missing.append(f"docs/fidelity.md:{number}: {quote[:60]}")
    assert not missing, "not verbatim in ../shared/papers: " + "; ".join(missing)


def test_the_quote_check_refuses_a_paraphrase(tmp_path):
    """The normalisation forgives whitespace and width, not wording."""
    papers = _normalised("We sampled 3,000 queries from the MS MARCO training set.")
    assert _normalised("We  sampled 3,000\nqueries") in papers
    assert _normalised("We sampled 3K queries") not in papers


def test_the_fidelity_table_pins_every_preset():
    presets = {preset for preset, *_ in _pinned_rows()}
    assert presets == {"debiasfirst", "capcal", "ocsft"} and len(_pinned_rows()) >= 40


@pytest.mark.parametrize(("preset", "key", "value", "statement"), _pinned_rows(),
                         ids=[f"{p}:{k}" for p, k, _, _ in _pinned_rows()])
def test_preset_holds_the_documented_value(preset, key, value, statement):
    node, parts = _preset(preset), key.split(".")
    while parts:  # entry names may hold dots (models.qwen2.5-7b.path): take the longest key that exists
        step = next((j for j in range(len(parts), 0, -1) if isinstance(node, dict) and ".".join(parts[:j]) in node), None)
        assert step, f"{preset}: no key {key} ({statement})"
        node, parts = node[".".join(parts[:step])], parts[step:]
    assert node == yaml.safe_load(value), f"{preset}: {key} is {node!r}, docs/fidelity.md says {value} ({statement})"


def test_preset_ir_datasets_ids_exist():
    import ir_datasets

    for name in ("debiasfirst", "capcal", "ocsft"):
        for dataset, spec in _preset(name)["datasets"].items():
            if spec["source"] == "irds":
                assert spec["id"] in ir_datasets.registry, f"{name}: datasets.{dataset}.id {spec['id']!r}"


def test_the_ablation_grid_is_complete_and_fair():
    """Table 3 / Figure 6: every objective × augmentation cell is trained, and with the same number of
    optimiser steps (PosAug's rotations give it no extra updates)."""
    training = _preset("debiasfirst")["training"]
    listwise = {name: run for name, run in training.items() if not methods.get(run["method"]).pointwise}
    cells = {(methods.get(run["method"]).label, run["aug"]) for run in listwise.values()}
    objectives = {"Rank", "Rank + LM", "Rank-IPS", "Rank-IPS + LM"}
    assert cells == {(o, a) for o in objectives for a in ("noaug", "randaug", "posaug")}
    assert len({run["hyper"]["max_steps"] for run in listwise.values()}) == 1
    assert all(run["hyper"].get("max_steps", -1) > 0 for run in listwise.values())
    experiments = {e["model"] for e in _preset("debiasfirst")["reranking"]["experiments"]}
    assert set(listwise) <= experiments  # every cell is evaluated
