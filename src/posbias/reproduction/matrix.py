"""The reproduction matrix: every expected figure beside what the run measured, marked.

:func:`bind` puts a figure's condition in the run's names (at DAG time, so the rule declares exactly
the result files each figure reads); :func:`measure` computes the bound figures from those files;
:func:`table` writes the matrix: per figure the paper's value, the run's (mean ± sd over seeds), the
signed gap and a mark — ``OK`` (within tolerance; for a bound, it holds), ``differs`` (the gap), or
``not run`` (what the run lacks). pyserini's and rank_llm's ``[OK]`` / ``[FAIL]`` matrices are the model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from posbias.paper.stats import mean_sd
from posbias.paper.writers import Table
from posbias.reproduction.expected import Expected, load
from posbias.reproduction.identity import Names, resolve
from posbias.reproduction.identity import load as load_identities
from posbias.reproduction.files import RESULT_SCHEMAS, available
from posbias.reproduction.statistics import STATISTICS, Measured, NotRun

OK, DIFFERS, NOT_RUN = "OK", "differs", "not run"
WORKFLOW = Path(__file__).resolve().parents[3]  # the checkout: config/reproduction/ ships there
_COPIED = ("order", "measure", "units", "significant", "column", "k", "what")


def _cells(condition: dict, names: Names) -> list[tuple[str, str | None]]:
    cells = []
    for collection in names.collections(condition["dataset"]):
        datasets = names.datasets.get(collection, [])
        if not datasets:
            raise NotRun(f"no dataset of this run is {collection}")
        retriever = condition.get("retriever")
        found = [(d, names.retrievers.get((d, retriever)) if retriever else None) for d in datasets]
        found = [cell for cell in found if cell[1] or not retriever]
        if not found:
            raise NotRun(f"{datasets[0]} has no {retriever} first stage in this run")
        cells.append(found[0])
    return cells


def _system(condition: dict, names: Names, cells, files: Callable, available: set[str]) -> dict:
    """One system of a figure (the condition itself, or a ``versus`` entry over it) in the run's names:
    its cells and the first variant of its model whose files the run has."""
    system = {"cells": cells, "debias": condition.get("debias", "none"),
              **{k: condition[k] for k in _COPIED if k in condition}}
    if "model" not in condition:
        return system
    variants = names.models.get(condition["model"])
    if variants is None:
        raise ValueError(f"model {condition['model']!r} is not in the identities file; add it there")
    if not variants:
        raise NotRun(f"no model of this run is {condition['model']}")
    missing, complete = None, []
    for variant in variants:
        candidate = {**system, "models": variant}
        lacking = [f for f in files(candidate, available) if f not in available]
        if not lacking:
            complete.append(variant)
            if "bases" not in condition:
                return candidate
        missing = missing or (lacking[0] if lacking else None)
    if "bases" in condition:  # a figure pooled over base models: every variant's seeds, at least `bases` of them
        if len(complete) < condition["bases"]:
            raise NotRun(f"the figure pools {condition['bases']} base models' {condition['model']}; this run has "
                         f"{len(complete)} (the identities file names its bases)")
        return {**system, "models": [m for variant in complete for m in variant]}
    raise NotRun(f"{condition['model']} ({variants[0][0]}) has no {missing} in this run")


def bind(figure: Expected, names: Names, available: set[str]) -> dict:
    """``{"bound": …, "files": […]}`` (the condition in the run's names and the result files it reads,
    all of which the run makes) or ``{"reason": …}`` (why it is not run)."""
    statistic = STATISTICS[figure.statistic]
    condition = figure.condition
    try:
        cells = _cells(condition, names) if "dataset" in condition else []
        bound = _system(condition, names, cells, statistic.files, available)
        versus = condition.get("versus", [])
        for entry in versus if isinstance(versus, list) else [versus]:
            other = {**condition, **entry}
            other.pop("versus", None)
            other_cells = _cells(other, names) if "dataset" in entry else cells
            bound.setdefault("versus", []).append(_system(other, names, other_cells, statistic.files, available))
        files = statistic.files(bound, available)
        lacking = [f for f in files if f not in available]
        if lacking:
            raise NotRun(f"the run makes no {lacking[0]}")
    except NotRun as exc:
        return {"reason": str(exc)}
    return {"bound": bound, "files": files}


def measure(figure: Expected, bound: dict, frame: pl.DataFrame) -> Measured:
    """The figure's statistic over the rows of the files it reads; JSON-decoded bindings carry cells as
    lists, which are made tuples again."""
    for system in [bound, *bound.get("versus", [])]:
        system["cells"] = [tuple(c) for c in system.get("cells", [])]
    return STATISTICS[figure.statistic].compute(frame, bound)


def _decimals(value: float) -> int:
    text = f"{value:g}"
    return len(text.split(".")[1]) if "." in text else 0


def _condition_text(condition: dict) -> str:
    parts = []
    for key in ("dataset", "retriever", "model", "order", "debias", "measure", "column", "k", "units", "what"):
        if key in condition:
            value = condition[key]
            parts.append(f"K={value}" if key == "k" else ("+".join(value) if isinstance(value, list) else str(value)))
    versus = condition.get("versus")
    if versus:
        others = versus if isinstance(versus, list) else [versus]
        parts.append("vs " + ", ".join(" ".join(str(v) for v in o.values()) for o in others))
    if condition.get("significant"):
        parts.append("significant")
    return " · ".join(parts)


def row(figure: Expected, outcome: Measured | str) -> dict:
    """One row of the matrix; ``outcome`` is what the run measured, or why it is not run."""
    base = {"id": figure.id, "paper": figure.paper, "where": figure.where, "condition": _condition_text(figure.condition),
            "claim": figure.claim, "paper_value": figure.value, "tolerance": figure.tolerance, "unit": figure.unit,
            "stated": figure.stated(), "reading": figure.reading or "", "why": figure.why}
    if isinstance(outcome, str):
        return {**base, "run_mean": math.nan, "run_sd": math.nan, "seeds": 0, "gap": math.nan, "mark": NOT_RUN,
                "note": outcome}
    scale = figure.scale ** STATISTICS[figure.statistic].power
    values = [v * scale for v in outcome.values]
    mean, sd = mean_sd(values)
    return {**base, "run_mean": mean, "run_sd": sd, "seeds": len(values), "gap": mean - figure.value,
            "mark": OK if figure.holds(mean) else DIFFERS, "note": outcome.note}


def table(rows: list[dict]) -> Table:
    """The matrix as a :class:`~posbias.paper.writers.Table` (numbers in the CSV, marks in the view)."""
    data = pl.DataFrame(rows, schema_overrides={"run_sd": pl.Float64, "run_mean": pl.Float64, "gap": pl.Float64})
    view = []
    for r in rows:
        digits = _decimals(r["paper_value"]) + (0 if r["claim"] != "value" and float(r["paper_value"]).is_integer() else 1)
        run = "–" if r["mark"] == NOT_RUN else f"{r['run_mean']:.{digits}f}"
        if r["seeds"] > 1:
            run += f" ± {r['run_sd']:.{digits}f}"
        gap = "" if r["mark"] != DIFFERS else f" ({r['gap']:+.{digits}f})"
        view.append({"figure": r["id"], "paper": r["paper"], "where": r["where"], "condition": r["condition"],
                     "paper's value": r["stated"], "run": run + (f" ({r['note']})" if r["note"] and r["mark"] != NOT_RUN else ""),
                     "mark": r["mark"] + gap + (f": {r['note']}" if r["mark"] == NOT_RUN else ""),
                     "reading": r["reading"]})
    notes = (f"{summary(rows)}. OK: within the tolerance of the paper's figure (for a bound, it holds); differs: "
             "outside it, the signed gap in brackets; not run: the run has no such condition (matched by what a "
             "collection, first stage and model are, not by their names: config/reproduction/identities.yaml). Each "
             "figure's quote, tolerance and its reason are in config/reproduction/ and the CSV.")
    return Table(data=data, view=pl.DataFrame(view), notes=notes)


def counts(rows: list[dict]) -> dict[str, int]:
    return {mark: sum(r["mark"] == mark for r in rows) for mark in (OK, DIFFERS, NOT_RUN)}


def summary(rows: list[dict]) -> str:
    """``reproduction: 2 OK, 0 differ, 74 not run``."""
    n = counts(rows)
    return f"reproduction: {n[OK]} OK, {n[DIFFERS]} differ, {n[NOT_RUN]} not run"


def workflow_path(path: str) -> Path:
    """A reproduction file of the config: relative to the working directory where it exists there (your
    copy), else to the workflow (the files that ship with it)."""
    return Path(path) if Path(path).is_absolute() or Path(path).exists() else WORKFLOW / path


@dataclass(frozen=True)
class Plan:
    """What the ``reproduction`` rule reads: the expected files, the identities file, each figure's
    binding (JSON: ``{"bound", "files"}`` or ``{"reason"}``) and the result files of the bound ones."""

    expected: list[str]
    identities: str
    bindings: str
    files: list[str]


def plan(config: dict) -> Plan:
    """Bind every expected figure of a prepared config to its run (DAG time)."""
    settings = config["reproduction"]
    expected = [str(workflow_path(p)) for p in settings["expected"]]
    identities = str(workflow_path(settings["identities"]))
    if not Path(identities).is_file():
        raise ValueError(f"reproduction.identities: {settings['identities']} is a file neither in the working "
                         "directory nor in the workflow; point it at an identities file (the default: "
                         "config/reproduction/identities.yaml)")
    names = resolve(config, load_identities(identities))
    files_made = available(config)
    bindings = {figure.id: bind(figure, names, files_made) for figure in load(expected)}
    files = sorted({f for b in bindings.values() for f in b.get("files", [])})
    return Plan(expected, identities, json.dumps(bindings, sort_keys=True), files)


def compute(expected: list[str], bindings: str, read: Callable[[str, str], pl.DataFrame]) -> list[dict]:
    """The matrix's rows: each figure of the ``expected`` files measured on the result files its
    binding names (``read(path, schema kind)`` loads one, each once), or why it is not run."""
    bound = json.loads(bindings)
    loaded: dict[str, pl.DataFrame] = {}
    rows = []
    for figure in load(expected):
        binding = bound[figure.id]
        if "reason" in binding:
            rows.append(row(figure, binding["reason"]))
            continue
        kind = RESULT_SCHEMAS[STATISTICS[figure.statistic].source]
        frame = pl.concat([loaded.setdefault(p, read(p, kind)) for p in binding["files"]])
        try:
            rows.append(row(figure, measure(figure, binding["bound"], frame)))
        except NotRun as exc:
            rows.append(row(figure, str(exc)))
    return rows


def summary_of(csv: str | Path) -> str:
    """The summary line of a written matrix (its CSV), with the Markdown's path."""
    marks = pl.read_csv(csv)["mark"].to_list()
    return summary([{"mark": m} for m in marks]) + f"; {Path(csv).with_suffix('.md')}"
