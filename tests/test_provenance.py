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
    bad = subprocess.run([sys.executable, "-m", "posbias.provenance", str(md)], capture_output=True, text=True)
    assert bad.returncode == 1 and "provenance is recorded in .parquet, .png and .pdf files" in bad.stderr
