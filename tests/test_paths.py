"""The results tree has one spelling: every path a rule writes or reads under ``results/`` is one of
:mod:`posbias.paths`'s patterns, every pattern there is one the workflow uses, and no package module spells
a results path itself."""

import inspect
import re
from pathlib import Path

import pytest

from posbias import paths

REPO = Path(__file__).resolve().parents[1]
RULE_FILES = [REPO / "Snakefile", REPO / "workflow" / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]


def _patterns() -> dict[str, str]:
    """Each function's path with every argument left a wildcard, as a regular expression (the functions that
    map given paths, ``producer`` and ``producers``, build none)."""
    out = {}
    for name, function in inspect.getmembers(paths, inspect.isfunction):
        if function.__module__ != paths.__name__ or {"path", "files"} & set(inspect.signature(function).parameters):
            continue
        pattern = function(**{arg: "{" + arg + "}" for arg in inspect.signature(function).parameters})
        out[name] = "".join("[^/]+" if part.startswith("{") else re.escape(part)
                            for part in re.split(r"(\{[^{}]*\})", pattern))
    return out


def _rule_paths() -> set[str]:
    found = set()
    for path in RULE_FILES:
        if path.exists():
            found |= set(re.findall(r'"(results/[^"]*)"', path.read_text()))
    return {p.replace("{{", "{").replace("}}", "}") for p in found}


def test_every_results_path_the_rules_spell_is_a_paths_pattern():
    patterns = _patterns()
    strays = sorted(p for p in _rule_paths() if not any(re.fullmatch(rx, p) for rx in patterns.values()))
    assert not strays, strays


def test_every_paths_pattern_is_a_path_the_rules_use():
    """A pattern a rule spells, or one a rule or the package builds by calling it (a checkpoints folder is a
    param, not an output)."""
    rule_paths = _rule_paths()
    code = "".join(p.read_text() for p in [*RULE_FILES, *(REPO / "src").rglob("*.py")] if p.exists())
    unused = sorted(name for name, rx in _patterns().items()
                    if not any(re.fullmatch(rx, p) for p in rule_paths) and f"paths.{name}(" not in code)
    assert not unused, unused


@pytest.mark.parametrize(("call", "expected"), [
    (lambda: paths.reranked(), "results/rerank/{model}/{dataset}/{retriever}/{order}/{debias}.parquet"),
    (lambda: paths.reranked("m", "dl19", "bm25", "shuffled-0", "none", "cost.parquet"),
     "results/rerank/m/dl19/bm25/shuffled-0/none.cost.parquet"),
    (lambda: paths.in_batch("m", "dl19", "bm25", "none", "list-0", "shuffled-0", "cost.parquet"),
     "results/rerank/m/dl19/bm25/batches/none.list-0/shuffled-0.cost.parquet"),
    (lambda: paths.producer("results/rerank/m/dl19/bm25/batches/none.list-0/shuffled-0.cost.parquet"),
     "results/rerank/m/dl19/bm25/batches/none.list-0"),
    (lambda: paths.producer("results/rerank/m/dl19/bm25/original/permsc@3.parquet"),
     "results/rerank/m/dl19/bm25/original/permsc@3.parquet"),
    (lambda: paths.producer("results/silver/msmarco/qrels/t3.parquet"), "results/silver/msmarco/qrels/t3.parquet"),
    (lambda: paths.silver("msmarco", "qrels", 3), "results/silver/msmarco/qrels/t3.parquet"),
    (lambda: paths.propensity("first", "reranked.cost"), "results/propensity/first/reranked.cost.parquet"),
    (lambda: paths.model("toy"), "results/models/toy"),
])
def test_a_function_called_with_values_gives_that_jobs_file(call, expected):
    assert call() == expected


def test_no_package_module_spells_a_results_path():
    """Outside ``posbias.paths`` the package builds result paths by calling it (docstrings may name them)."""
    offenders = []
    for path in sorted((REPO / "src" / "posbias").rglob("*.py")):
        if path.name == "paths.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""f?["']results/""", line.split("#")[0]):
                offenders.append(f"{path.relative_to(REPO)}:{lineno}")
    assert not offenders, offenders
