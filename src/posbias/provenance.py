"""What produced an artifact: recorded in every Parquet file, table and figure the workflow writes.

A record names the package version, the git commit of the checkout and whether it had uncommitted
changes, the rule and wildcards of the job, a SHA-256 of the config slice the job read (its params),
the config seed, the versions of the packages results depend on and the CPU kernels torch was told to use
(:data:`KERNELS_ENV`: floating-point sums differ between kernels, so a run on AVX-512 kernels does not reproduce
one on AVX2 kernels to the last bit). It holds no time stamp, so two runs of the same config write the same bytes.

The job context is set once per job by :func:`posbias.jobs.logged`; outside a workflow job (tests,
notebooks) the record says so (``rule`` is null).

Print an artifact's record with ``python -m posbias.provenance PATH`` (Parquet, PNG, PDF or a table's
Markdown); ``snakemake --report`` shows it under each table and figure (:class:`ReportLine`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from posbias import __version__

KEY = "posbias.provenance"  # the Parquet schema-metadata key, PNG text key and PDF subject prefix
PACKAGES = ("torch", "transformers", "tokenizers", "peft", "polars", "pyarrow", "numpy", "scipy", "ir_datasets",
            "ir-measures", "pyserini", "snakemake")

# torch's own CPU kernels, read when it loads: set to a lower instruction set than the CPU's, torch computes as on a
# CPU that has only that one. The record names this variable's value.
KERNELS_ENV = "ATEN_CPU_CAPABILITY"
NATIVE = "native"  # the record's value when torch picks the CPU's best kernels itself
# The CPU kernels every published study is computed with (posbias.publish refuses others), and CI's reruns of their
# slices (tests/conftest.py): torch's AVX2 kernels (with oneDNN's and MKL's held to AVX2), which every x86 CPU of
# the last decade has; on an AVX-512 CPU torch's own choice sums in another order, and a training curve drifts by a
# few percent over 300 steps (measured: the OC-SFT toy's base grader, 4.5 % at most; 0 with these set)
KERNELS = {KERNELS_ENV: "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}

_JOB: dict = {}


def set_job(rule: str | None, wildcards: dict, params: dict, seed) -> None:
    """Record the running job (called by :func:`posbias.jobs.logged`)."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    _JOB.clear()
    _JOB.update(rule=rule, wildcards={k: str(v) for k, v in wildcards.items()}, params_sha256=digest, seed=seed)


@functools.cache
def git_state() -> dict:
    """The commit of the checkout the package runs from, whether tracked files differ from it, and
    ``git describe`` (the release tag it is at or after)."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip() != ""
        # the release tag and the commits since it (v0.2.0-3-g1a2b3c4), or the short commit without tags
        describe = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--always"], capture_output=True,
                                  text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None, "git_describe": None}  # an installed package
    return {"git_commit": commit, "git_dirty": dirty, "git_describe": describe}


@functools.cache
def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def record() -> dict:
    """The provenance of what the current job writes."""
    return {"posbias_version": __version__, **git_state(),
            **({"rule": None, "wildcards": {}, "params_sha256": None, "seed": None} | _JOB),
            "packages": package_versions(), "cpu_kernels": os.environ.get(KERNELS_ENV) or NATIVE}


def line(rec: dict | None = None) -> str:
    """One human-readable line for table notes."""
    rec = rec or record()
    commit = (rec["git_commit"] or "no git checkout")[:12] + (" (uncommitted changes)" if rec["git_dirty"] else "")
    return (f"Produced by posbias {rec['posbias_version']}, commit {commit}, rule {rec['rule']}, config slice "
            f"sha256 {(rec['params_sha256'] or '-')[:12]}, seed {rec['seed']}.")


def read(path: str | Path) -> dict:
    """The record stored in a Parquet file, a PNG or a PDF the workflow wrote."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = pq.read_schema(path).metadata or {}
        raw = meta.get(KEY.encode())
    elif path.suffix == ".png":
        from PIL import Image

        raw = Image.open(path).info.get(KEY)
    elif path.suffix == ".md":
        text = path.read_text(encoding="utf-8")
        start = text.find(f"<!-- {KEY} ")
        raw = text[start + len(KEY) + 6:text.find(" -->", start)] if start >= 0 else None
    elif path.suffix == ".pdf":
        text = path.read_bytes()
        start = text.find(KEY.encode() + b" ")
        raw = text[start + len(KEY) + 1:text.find(b")", start)].replace(b"\\(", b"(").replace(b"\\)", b")") \
            if start >= 0 else None
    else:
        raise ValueError(f"{path}: provenance is recorded in .parquet, .png, .pdf and tables' .md files")
    if raw is None:
        raise ValueError(f"{path}: no provenance record (written outside the workflow, or by an older version)")
    return json.loads(raw)


class ReportLine:
    """Gives the report's captions the provenance of a job's outputs: rules with ``report()`` outputs
    pass one as the param ``provenance`` and their caption ends with
    ``{{ snakemake.params.provenance.line(snakemake.output) }}``. Not a builtin value, so Snakemake
    leaves it out of the params it compares."""

    def __repr__(self) -> str:  # stable, so the params digest of the record is the same from run to run
        return "posbias.provenance.ReportLine()"

    def line(self, outputs) -> str:
        """The line of the first of ``outputs`` that holds a record (every output of a job has the same)."""
        for path in outputs:
            try:
                return line(read(path))
            except (ValueError, OSError):
                continue
        return "No provenance record: written outside the workflow or by an older version."


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m posbias.provenance",
                                     description="Print what produced each artifact (.parquet, .png, .pdf, table .md).")
    parser.add_argument("paths", nargs="+", metavar="ARTIFACT")
    for path in parser.parse_args(argv).paths:
        try:
            print(json.dumps({"artifact": str(path), **read(path)}, indent=1))
        except (ValueError, OSError) as exc:
            print(f"posbias.provenance: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
