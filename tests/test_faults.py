"""Faults a cluster throws: a job killed while it writes, a full disk, a corrupt input, a second
Snakemake process in the same folder. None leaves a truncated artifact or a traceback.

A kill is real: a child process writes the artifact and SIGKILLs itself at the moment the finished
bytes would take the artifact's place (the rename), the latest point a kill can strike; any earlier
kill leaves even less of the new artifact."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from posbias import schemas
from posbias.errors import PosbiasError
from tests.conftest import REPO

RUN = pl.DataFrame({"query_id": ["q1"] * 3, "doc_id": ["d1", "d2", "d3"], "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]})

# The child: patch the atomic renames to kill the process, then write the artifact named by argv[1] to argv[2].
CHILD = """
import os, pathlib, signal, sys
import polars as pl
kind, path = sys.argv[1], pathlib.Path(sys.argv[2])
run = pl.DataFrame({"query_id": ["q9"], "doc_id": ["d9"], "rank": [1], "score": [9.0]})
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
if kind == "parquet":
    from posbias import schemas
    os.replace = die
    schemas.write(run, path, "run")
elif kind == "trec":
    from posbias import runs
    os.replace = die
    runs.write_trec(run, path, "new")
elif kind == "table":
    from posbias.paper.writers import Table, write
    os.replace = die
    write(Table(run, run, "new notes"), path.with_suffix(""), "new")
elif kind == "figure":
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from posbias.paper.writers import save_figure
    os.replace = die
    fig, ax = plt.subplots()
    ax.plot([1, 2], [2, 1])
    save_figure(fig, path)
elif kind == "model":
    from posbias.models import build_tiny_causal_lm
    pathlib.Path.rename = die
    build_tiny_causal_lm(["alpha beta gamma delta"] * 20, path, 300, 16, 1, 2, 64, 1)
elif kind == "index":
    from posbias.data.collection import corpus_frame
    from posbias.retrieval import lucene
    pathlib.Path.rename = die
    lucene.build_bm25_index(corpus_frame(["d1", "d2"], ["alpha beta", "gamma delta"]), path, 1)
raise SystemExit("the kill did not come")
"""


def _previous(kind: str, path: Path) -> None:
    """A good artifact of ``kind`` at ``path``, as an earlier job left it."""
    if kind == "parquet":
        schemas.write(RUN, path, "run")
    elif kind == "trec":
        from posbias import runs

        runs.write_trec(RUN, path, "old")
    elif kind == "table":
        from posbias.paper.writers import Table, write

        write(Table(RUN, RUN, "old notes"), path.with_suffix(""), "old")
    elif kind == "figure":
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from posbias.paper.writers import save_figure

        fig, _ = plt.subplots()
        save_figure(fig, path)


FILES = {"parquet": "run.parquet", "trec": "run.trec", "table": "table.md", "figure": "figure.png",
         "model": "model", "index": "index"}


@pytest.mark.parametrize("kind", list(FILES))
def test_a_job_killed_while_writing_leaves_the_previous_artifact_or_none(tmp_path, kind):
    path = tmp_path / FILES[kind]
    _previous(kind, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    child = subprocess.run([sys.executable, "-c", CHILD, kind, str(path)], capture_output=True, text=True,
                           timeout=600, cwd=tmp_path)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    visible = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.name.startswith(".")}
    assert visible == before, sorted(visible)  # the previous artifact, byte for byte; no new file beside it
    if kind in ("model", "index"):  # folders: a job's rerun starts from none (Snakemake removed the old one)
        assert not path.exists()
    elif kind == "parquet":
        assert schemas.read(path, "run").equals(RUN)


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs (CI runs as root); skipped where mounting is not allowed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_line_and_leaves_no_half_written_file(full_disk):
    (full_disk / "filler").write_bytes(b"x" * 200 * 1024)  # what other jobs left
    big = pl.DataFrame({"query_id": [f"q{i}" for i in range(20000)], "doc_id": [f"doc-{i:08d}" for i in range(20000)],
                        "rank": list(range(1, 20001)), "score": [float(i) for i in range(20000)]})
    with pytest.raises(PosbiasError) as full:
        schemas.write(big, full_disk / "run.parquet", "run")
    message = str(full.value)
    assert "run.parquet: the disk is full" in message and "\n" not in message, message
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no run.parquet, no temporary file


@pytest.mark.parametrize("damage", ["truncated", "not-parquet", "empty"])
def test_a_corrupt_parquet_input_is_one_line_naming_it(tmp_path, damage):
    path = tmp_path / "run.parquet"
    schemas.write(RUN, path, "run")
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "not-parquet": b"query_id,doc_id\n", "empty": b""}[damage])
    with pytest.raises(PosbiasError) as bad:
        schemas.read(path, "run")
    message = str(bad.value)
    assert message.startswith(f"{path}: not a readable Parquet file") and "--forcerun" in message, message
    assert "\n" not in message


# Holds every job script of a run until the gate file exists: the first run then holds its lock as long
# as the test needs (a sitecustomize module on the jobs' PYTHONPATH; Snakemake's own process passes).
GATE = """
import os, pathlib, sys, time
if os.environ.get("GATE") and ".snakemake/scripts/" in " ".join(sys.argv):
    pathlib.Path(os.environ["GATE"] + ".waiting").touch()
    while not pathlib.Path(os.environ["GATE"]).exists():
        time.sleep(0.05)
"""


# Kills the first job script of a run with SIGKILL, as the kernel's OOM killer (or SLURM's OUT_OF_MEMORY)
# would; the marker file makes the retry live.
OOM = """
import os, pathlib, signal, sys
if os.environ.get("OOM_ONCE") and ".snakemake/scripts/" in " ".join(sys.argv):
    marker = pathlib.Path(os.environ["OOM_ONCE"])
    if not marker.exists():
        marker.write_text(" ".join(sys.argv))
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.workflow
def test_a_job_killed_for_memory_is_retried_with_twice_the_memory(workdir, tmp_path):
    """A data job SIGKILLed on its first attempt (what the OOM killer does) is retried where retries are
    configured (--retries 1, as the slurm profile sets), asking for its memory times the attempt."""
    from tests.test_bad_input import _config, _write_files

    _write_files(workdir / "in", {})
    configfile = workdir / "oom.yaml"
    configfile.write_text(yaml.safe_dump(_config("trec"), sort_keys=False))
    (tmp_path / "oom").mkdir()
    (tmp_path / "oom" / "sitecustomize.py").write_text(OOM)
    env = {**os.environ, "OOM_ONCE": str(tmp_path / "killed"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "oom"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
                          "--configfile", str(configfile), "--replace-workflow-config", "--cores", "1", "--retries", "1",
                          "data"], cwd=workdir, capture_output=True, text=True, timeout=600, env=env)
    console = out.stdout + out.stderr
    assert out.returncode == 0 and (tmp_path / "killed").is_file(), console[-3000:]
    killed = re.search(r"rule (\w+):\n(?:    .*\n)*?    resources: .*?mem_mb=(\d+)", console)
    rule, first = killed.group(1), int(killed.group(2))
    retried = re.findall(rf"rule {rule}:\n(?:    .*\n)*?    resources: .*?mem_mb=(\d+)", console)
    assert [int(m) for m in retried] == [first, 2 * first], (rule, retried, console[-3000:])
    assert (workdir / "results" / "data" / "mine" / "qrels.parquet").is_file()


@pytest.mark.workflow
def test_a_second_snakemake_in_the_same_folder_is_refused_by_the_lock(workdir, tmp_path):
    """While one run's job is under way, a second run of the same targets in the same folder is refused
    by Snakemake's lock, naming --unlock; the first finishes unharmed."""
    from tests.test_bad_input import _config, _write_files

    _write_files(workdir / "in", {})
    configfile = workdir / "lock.yaml"
    configfile.write_text(yaml.safe_dump(_config("trec"), sort_keys=False))
    (tmp_path / "gate").mkdir()
    (tmp_path / "gate" / "sitecustomize.py").write_text(GATE)
    gate = tmp_path / "open"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
           str(configfile), "--replace-workflow-config", "--cores", "1", "data"]
    env = {**os.environ, "GATE": str(gate),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "gate"), os.environ.get("PYTHONPATH", "")])}
    first = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{gate}.waiting").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(f"{gate}.waiting").exists(), "the first run's job never started"
        second = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300)
    finally:
        gate.touch()
    first_out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, first_out[-3000:]
    console = second.stdout + second.stderr
    assert second.returncode != 0 and "Directory cannot be locked" in console and "--unlock" in console, console[-3000:]
    assert "Traceback" not in console
