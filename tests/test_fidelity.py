"""The paper presets hold what docs/fidelity.md says they hold: every row of its tables that names a
preset, a config key and a value is checked against the preset file, so neither can drift alone."""

import re
from pathlib import Path

import pytest
import yaml

from posbias import methods

REPO = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\|(?P<statement>[^|]+)\|\s*(?P<preset>\w+)\s*\|\s*`(?P<key>[^`]+)`\s*\|\s*(?P<value>[^|]+?)\s*\|")


def _preset(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / "paper" / f"{name}.yaml").read_text())


def _pinned_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (REPO / "docs" / "fidelity.md").read_text().splitlines():
        match = ROW.match(line)
        if match and match["preset"] != "–" and not match["value"].startswith(("(", "–")):
            rows.append((match["preset"], match["key"], match["value"], match["statement"].strip()))
    return rows


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
