"""Shared fixtures: paths to the repository and to the offline data beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posbias.provenance import KERNELS

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.phases", "tests.runs"]
SHARED_DATA = Path(os.environ.get("POSBIAS_SHARED_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The CPU kernels the published studies were computed with, set before anything loads torch (posbias.publish does
# not): the tests that rerun their slices then reproduce them on an AVX-512 CPU too, and every workflow run here
# inherits them
for _key, _value in KERNELS.items():
    os.environ.setdefault(_key, _value)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that read real collections need it (CI has it beside the clone)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data not found at {SHARED_DATA} (set POSBIAS_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def irds_home(shared_data: Path, tmp_path_factory) -> Path:
    """An ir_datasets cache primed from ../shared/data: CI's (POSBIAS_IRDS_HOME), else a fresh one."""
    if os.environ.get("POSBIAS_IRDS_HOME"):
        return Path(os.environ["POSBIAS_IRDS_HOME"])
    home = tmp_path_factory.mktemp("irds")
    subprocess.run([str(REPO / ".ci" / "prime-irds-cache"), str(shared_data), str(home)], check=True,
                   capture_output=True)
    return home


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, timeout: int = 1200,
              env: dict[str, str] | None = None):
    """Run the real workflow in ``workdir`` (outputs land there, not in the repository); ``env`` adds to
    this process's environment."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir)]
    if configfile is not None:
        cmd += ["--configfile", str(configfile), "--replace-workflow-config"]
    cmd += list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch working directory holding a copy of the default config (relative paths work).

    It is ``tmp_path/work``, so a test can lay ``tmp_path/shared`` beside it as the repository has
    ``../shared`` beside it.
    """
    shutil.copytree(REPO / "config", tmp_path / "work" / "config")
    return tmp_path / "work"


@pytest.fixture(scope="session")
def preset_plans():
    """The compute plan of every paper preset on stand-in data (posbias.dry_plan.preset_summaries)."""
    from posbias import dry_plan

    return dry_plan.preset_summaries(sorted((REPO / "config" / "paper").glob("*.yaml")))
