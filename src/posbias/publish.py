"""Publish a finished run's results for committing beside the code: its tables, figures and per-query metrics,
with what produced them.

``python -m posbias.publish RUN_DIR DEST --config CONFIG`` copies from the run's working directory (the folder
holding ``results/``, ``benchmarks/`` and ``.snakemake/``):

- every table's Markdown and every CSV (``results/tables/``) and every figure's PNG (``results/figures/``);
- the per-query metrics of every reranking experiment, in one CSV (``per_query.csv``: model, dataset,
  retriever, order, debias, query, measure, value), the values a later run is checked against;
- the config the run read;

and writes ``MANIFEST.json`` (the commit, version and package versions of the run, each file's sha256, the
jobs' summed seconds and the run's wall time, summed over its Snakemake invocations) and ``README.md`` (the same
for a reader). It refuses a run whose artifacts name more than one commit or an uncommitted checkout, or that has
no results: published numbers come from one committed state of the code. Nothing is written to ``DEST`` unless
everything is (a scratch folder renamed at the end).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import shutil
import sys
from datetime import datetime
from pathlib import Path

import polars as pl

from posbias import provenance
from posbias.errors import PosbiasError

PER_QUERY = "per_query.csv"
LOSS_CURVES = "loss_curves.csv"
MANIFEST = "MANIFEST.json"
# the per-query metric files of rule rerank_summary's inputs: results/metrics/rerank/<model>/<dataset>/
# <retriever>/<debias>.parquet (the .summary and .curve files beside them are aggregates)
_METRIC = re.compile(r"^[^.]+(@[^.]+)?\.parquet$")
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def per_query(run_dir: Path) -> pl.DataFrame:
    """Every reranking experiment's per-query metrics, sorted, one frame."""
    files = sorted(p for p in (run_dir / "results" / "metrics" / "rerank").rglob("*.parquet") if _METRIC.match(p.name))
    if not files:
        raise PosbiasError(f"{run_dir}/results/metrics/rerank: no per-query metrics; run the workflow first")
    frame = pl.concat([pl.read_parquet(p) for p in files], how="vertical")
    return frame.sort("model", "dataset", "retriever", "debias", "order", "query_id", "measure")


def loss_curves(run_dir: Path) -> pl.DataFrame | None:
    """Every training run's logged steps (``results/metrics/train/<model>.parquet``), one frame; None if none."""
    files = sorted((run_dir / "results" / "metrics" / "train").glob("*.parquet"))
    if not files:
        return None
    frames = [pl.read_parquet(p).with_columns(pl.lit(p.stem).alias("model")) for p in files]
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.select("model", *[c for c in frame.columns if c != "model"])


def invocations(run_dir: Path) -> list[float]:
    """Each Snakemake invocation's wall time, oldest first: its log's first and last time stamps (an invocation
    that logged fewer than two counts 0)."""
    walls = []
    for log in sorted((run_dir / ".snakemake" / "log").glob("*.snakemake.log")):
        stamps = [datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
                  for line in log.read_text(encoding="utf-8").splitlines() if (m := _STAMP.match(line.strip()))]
        walls.append((stamps[-1] - stamps[0]).total_seconds() if len(stamps) > 1 else 0.0)
    return walls


def wall_seconds(run_dir: Path) -> float | None:
    """The run's wall time: its Snakemake invocations' summed (a study resumed or finished by a second
    invocation took both); None without a log."""
    walls = invocations(run_dir)
    return sum(walls) if walls else None


def job_seconds(run_dir: Path) -> float:
    """The jobs' summed wall seconds, from their ``benchmark:`` files."""
    total = 0.0
    for path in (run_dir / "benchmarks").rglob("*.tsv"):
        rows = list(csv.DictReader(path.open(encoding="utf-8"), delimiter="\t"))
        total += float(rows[-1]["s"]) if rows else 0.0
    return total


def _one_state(records: dict[str, dict]) -> dict:
    """The commit every artifact names, computed with the published kernels (:data:`posbias.provenance.KERNELS`);
    one line naming the odd ones out otherwise."""
    commits = {(r["git_commit"], r["git_dirty"]) for r in records.values()}
    if len(commits) != 1:
        raise PosbiasError(f"the run's artifacts come from {len(commits)} states of the code "
                           f"({sorted(str(c) for c in commits)}); rerun them from one commit before publishing")
    (commit, dirty), = commits
    if dirty or commit is None:
        raise PosbiasError("the run's artifacts were written by a checkout with uncommitted changes (or outside "
                           "git); commit, rerun and publish again")
    kernels = {r.get("cpu_kernels", provenance.NATIVE) for r in records.values()}
    if kernels != {provenance.KERNELS[provenance.KERNELS_ENV]}:
        raise PosbiasError(f"the run's artifacts were computed with torch's {'/'.join(sorted(kernels))} CPU kernels, "
                           f"the published studies with {provenance.KERNELS[provenance.KERNELS_ENV]}'s; rerun with "
                           f"{' '.join(f'{k}={v}' for k, v in provenance.KERNELS.items())} set, so CI reproduces it on any x86 CPU")
    return next(iter(records.values()))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def publish(run_dir: Path, dest: Path, config: Path) -> dict:
    """Copy the run's tables, figures, per-query metrics and config into ``dest``; returns the manifest."""
    run_dir, dest = Path(run_dir), Path(dest)
    if not Path(config).is_file():
        raise PosbiasError(f"{config}: no such config file; pass the --configfile the run read")
    tables = sorted((run_dir / "results" / "tables").glob("*.md"))
    figures = sorted((run_dir / "results" / "figures").glob("*.png"))
    if not tables:
        raise PosbiasError(f"{run_dir}/results/tables: no tables; run the workflow to its end first")
    records = {str(p.relative_to(run_dir)): provenance.read(p) for p in figures}
    records |= {str(p.relative_to(run_dir)): provenance.read(p) for p in tables if "posbias.provenance" in
                p.read_text(encoding="utf-8")}
    frame = per_query(run_dir)
    state = _one_state(records)
    scratch = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        (scratch / "tables").mkdir(parents=True)
        (scratch / "figures").mkdir()
        for table in tables + sorted((run_dir / "results" / "tables").glob("*.csv")):  # claims.csv has no .md
            shutil.copy2(table, scratch / "tables" / table.name)
        for png in figures:
            shutil.copy2(png, scratch / "figures" / png.name)
        frame.write_csv(scratch / PER_QUERY)
        curves = loss_curves(run_dir)
        if curves is not None:
            curves.write_csv(scratch / LOSS_CURVES)
        shutil.copy2(config, scratch / "config.yaml")
        files = sorted(p for p in scratch.rglob("*") if p.is_file())
        manifest = {
            "git_commit": state["git_commit"], "git_describe": state["git_describe"],
            "posbias_version": state["posbias_version"], "packages": state["packages"],
            "cpu_kernels": state["cpu_kernels"],
            "config": Path(config).name, "job_seconds": round(job_seconds(run_dir), 1),
            "wall_seconds": wall_seconds(run_dir), "invocations": len(invocations(run_dir)),
            "experiments": frame.select("model", "dataset", "retriever").unique().sort("model", "dataset").rows(),
            "files": {str(p.relative_to(scratch)): _sha256(p) for p in files},
        }
        (scratch / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        (scratch / "README.md").write_text(_readme(manifest, tables, figures), encoding="utf-8")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if dest.exists():  # the previous publication goes only once the new one is complete
        old = dest.with_name(f".{dest.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        dest.rename(old)
        scratch.rename(dest)
        shutil.rmtree(old)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        scratch.rename(dest)
    return manifest


def _readme(manifest: dict, tables: list[Path], figures: list[Path]) -> str:
    wall = manifest["wall_seconds"]
    lines = [
        f"# Published results: `{manifest['config']}`",
        "",
        "Written by `python -m posbias.publish` from a finished run; do not edit by hand (publish again).",
        "",
        f"- code: posbias {manifest['posbias_version']}, commit `{manifest['git_commit']}` "
        f"(`{manifest['git_describe']}`), no uncommitted changes; torch's {manifest['cpu_kernels']} CPU kernels",
        f"- config: `config.yaml` (a copy of `{manifest['config']}`)",
        f"- time: {manifest['job_seconds']:,.0f} s of jobs"
        + (f", {wall:,.0f} s wall ({wall / 60:.0f} min) over its {manifest['invocations']} Snakemake "
           "invocation(s)" if wall else ""),
        "- experiments: " + "; ".join(" · ".join(e) for e in manifest["experiments"]),
        f"- `{PER_QUERY}`: every experiment's per-query metrics (the values a later run is checked against)",
        *([f"- `{LOSS_CURVES}`: every training run's logged steps"] if LOSS_CURVES in manifest["files"] else []),
        f"- `{MANIFEST}`: the packages' versions and each file's sha256",
        "",
        "Tables: " + ", ".join(f"[{t.stem}](tables/{t.name})" for t in tables),
        "",
        "Figures: " + ", ".join(f"[{f.stem}](figures/{f.name})" for f in figures),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posbias.publish", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="the run's working directory (holding results/)")
    parser.add_argument("dest", type=Path, help="the folder to write, e.g. docs/results/<study>")
    parser.add_argument("--config", type=Path, required=True, help="the config file the run read")
    args = parser.parse_args(argv)
    try:
        manifest = publish(args.run_dir, args.dest, args.config)
    except (PosbiasError, ValueError, OSError) as exc:
        print(f"posbias.publish: {exc}", file=sys.stderr)
        return 1
    print(f"{args.dest}: {len(manifest['files'])} files from commit {manifest['git_commit'][:12]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
