"""Every artifact records what produced it: Parquet schema metadata, table notes, figure metadata."""

import json
import subprocess
import sys

import polars as pl

from posbias import __version__, paper, provenance, schemas
from posbias.paper.writers import Table, pyplot, save_figure


def test_parquet_tables_and_figures_carry_the_job_record_and_the_command_prints_it(tmp_path):
    provenance.set_job("prepare_dataset", {"dataset": "toy"}, {"spec": {"source": "toy"}, "seed": 3}, 3)
    run = pl.DataFrame({"query_id": ["q"], "doc_id": ["d"], "rank": [1], "score": [1.0]})
    schemas.write(run, tmp_path / "run.parquet", "run")
    rec = provenance.read(tmp_path / "run.parquet")
    assert rec["rule"] == "prepare_dataset" and rec["wildcards"] == {"dataset": "toy"} and rec["seed"] == 3
    assert rec["posbias_version"] == __version__ and len(rec["git_commit"]) == 40 and isinstance(rec["git_dirty"], bool)
    assert rec["packages"]["polars"] == pl.__version__ and len(rec["params_sha256"]) == 64
    # the same job and config give the same record (no time stamp), another config slice another hash
    again = tmp_path / "again.parquet"
    schemas.write(run, again, "run")
    assert again.read_bytes() == (tmp_path / "run.parquet").read_bytes()
    provenance.set_job("prepare_dataset", {"dataset": "toy"}, {"spec": {"source": "toy"}, "seed": 4}, 4)
    assert provenance.record()["params_sha256"] != rec["params_sha256"]
    md, _, tex = paper.write(Table(run, run.select("query_id"), "notes"), tmp_path / "t", "A table")
    assert "Produced by posbias" in md.read_text() and "rule prepare_dataset" in md.read_text()
    assert tex.read_text().startswith("% Produced by posbias")
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, tmp_path / "f.png")
    for figure in ("f.png", "f.pdf"):
        assert provenance.read(tmp_path / figure)["rule"] == "prepare_dataset", figure
    out = subprocess.run([sys.executable, "-m", "posbias.provenance", str(tmp_path / "run.parquet")],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["rule"] == "prepare_dataset"
    # a table's Markdown holds the whole record too, and the report's captions print its line
    assert provenance.read(md)["params_sha256"] == provenance.record()["params_sha256"]
    line = provenance.ReportLine().line([str(tmp_path / "models"), str(md), str(tmp_path / "f.png")])
    assert line.startswith("Produced by posbias") and "rule prepare_dataset" in line
    assert provenance.ReportLine().line([str(tmp_path / "t.csv")]).startswith("No provenance record")
    bad = subprocess.run([sys.executable, "-m", "posbias.provenance", str(tmp_path / "t.csv")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "provenance is recorded in .parquet, .png, .pdf and tables' .md files" in bad.stderr


def test_the_version_is_the_changelog_release_and_the_git_tag():
    """``posbias.__version__`` is the newest CHANGELOG release (the first heading other than "Unreleased",
    where work since it is listed), and ``git describe`` names its tag ``v<version>`` (at it, or commits after
    it)."""
    from tests.conftest import REPO

    newest = next(line for line in (REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")
                  and line != "## Unreleased")
    assert newest.split()[1] == __version__, newest
    import yaml

    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert str(citation["version"]) == __version__ and str(citation["date-released"]) in newest, citation
    tags = subprocess.run(["git", "-C", str(REPO), "tag", "--list", "v*"], capture_output=True, text=True).stdout
    if not tags.strip():
        import pytest

        pytest.skip("this clone has no release tags (git fetch --tags)")
    latest = subprocess.run(["git", "-C", str(REPO), "describe", "--tags", "--abbrev=0"], capture_output=True,
                            text=True, check=True).stdout.strip()
    assert latest == f"v{__version__}", f"git describe names {latest}; bump posbias.__version__ or tag the release"
    assert provenance.git_state()["git_describe"].startswith(latest)


def test_a_job_is_held_to_its_threads_without_importing_torch(tmp_path):
    """posbias.jobs.logged holds a script job to its Snakemake threads: through the environment, so a
    job that never imports torch does not pay for it, and torch (imported later) starts with them."""
    code = """
import sys, types
from posbias.jobs import logged
job = types.SimpleNamespace(log=[sys.argv[1]], rule="r", wildcards={}, params={}, config={}, threads=1)
with logged(job, "r"):
    assert "torch" not in sys.modules
    import torch
    print(torch.get_num_threads(), flush=True)
"""
    log = tmp_path / "job.log"
    subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True)
    assert log.read_text().splitlines()[0] == "1", log.read_text()


def test_the_suite_computes_with_the_published_kernels_and_records_them(monkeypatch):
    """tests/conftest.py holds torch to the published studies' CPU kernels (posbias.provenance.KERNELS) before torch
    loads, so the slices CI reruns reproduce them on an AVX-512 CPU too; every record names the kernels."""
    import torch

    from posbias.provenance import KERNELS

    assert torch.backends.cpu.get_cpu_capability() in ("AVX2", "DEFAULT")  # never AVX512, whatever the CPU has
    assert provenance.record()["cpu_kernels"] == KERNELS["ATEN_CPU_CAPABILITY"] == "avx2"
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert provenance.record()["cpu_kernels"] == "native"
