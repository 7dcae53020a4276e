"""Planned jobs, SLURM submissions and model loads of a config, from a Snakemake dry run.

    python bench/job_plan.py config/paper/debiasfirst.yaml config/paper/ocsft.yaml [--snakefile PATH]

Prints one line per config: every job, the jobs that go to sbatch (of rules without ``localrule: True``), the
dry run's wall seconds (issue 55's target: at most 15 s a preset on a quiet 2-CPU machine), the
model loads (every job of a rule that loads a model: rerank, propensity_rerank, silver_labels with a
model teacher, train, and index/retrieve of dense and SPLADE encoders) and the rerank jobs alone. Local
files a preset names get empty stand-ins in a scratch folder (a dry run only checks they exist), so it
runs without the data or the models. ``--snakefile`` points at another checkout's Snakefile to compare
before and after a change.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from posbias import config as pbconfig
from posbias.retrieval.kinds import RETRIEVER_KINDS

LOADS_A_MODEL = {"rerank", "propensity_rerank", "train"}


def local_rules(snakefile: Path) -> set[str]:
    """The rules that run on the submitting host (each declares ``localrule: True``), as Snakemake parses them."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ResourceSettings

    with SnakemakeApi() as api:
        workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=snakefile,
                                workdir=snakefile.parent)._workflow
        return set(workflow._localrules)


def dry_run(snakefile: Path, configfile: Path, workdir: Path, local: set[str]) -> list[tuple[str, bool, dict]]:
    """(rule, runs locally: in ``local``, wildcards) of every job a dry run plans."""
    spec = yaml.safe_load(configfile.read_text())
    shutil.copytree(snakefile.parent / "config", workdir / "config")  # the default config, deepspeed files
    for entry in spec.get("datasets", {}).values():
        if entry.get("source") in ("trec", "imported", "listwise", "beir"):
            for name in pbconfig.dataset_files({"split": "test", **entry}):
                (workdir / name).parent.mkdir(parents=True, exist_ok=True)
                (workdir / name).touch()
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(snakefile), "-d", str(workdir),
                          "--configfile", str(configfile.resolve()), "--replace-workflow-config"],
                         capture_output=True, text=True, cwd=workdir, check=False,
                         env=os.environ | {"PYTHONPATH": str(snakefile.parent / "src")})
    if out.returncode:
        raise SystemExit(f"{configfile}: the dry run failed\n{(out.stdout + out.stderr)[-3000:]}")
    jobs: list[tuple[str, bool, dict]] = []
    for line in out.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
            jobs.append((rule, rule in local, {}))
        elif line.strip().startswith("wildcards:") and jobs:
            jobs[-1][2].update(kv.split("=", 1) for kv in line.split(":", 1)[1].strip().split(", "))
    return jobs


def loads_a_model(rule: str, wildcards: dict, retrievers: dict) -> bool:
    if rule in ("index", "retrieve"):
        kind = retrievers.get(wildcards.get("retriever"), {}).get("kind")
        return kind in RETRIEVER_KINDS and RETRIEVER_KINDS[kind].encoder
    if rule == "silver_labels":
        return wildcards.get("teacher") != "qrels"
    return rule in LOADS_A_MODEL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--snakefile", type=Path, default=REPO / "Snakefile")
    args = parser.parse_args()
    local = local_rules(args.snakefile.resolve())
    for configfile in args.configs:
        retrievers = yaml.safe_load(configfile.read_text()).get("retrievers", {})
        with tempfile.TemporaryDirectory() as scratch:
            started = time.perf_counter()
            jobs = dry_run(args.snakefile.resolve(), configfile, Path(scratch), local)
            seconds = time.perf_counter() - started
        rules = Counter(rule for rule, _, _ in jobs)
        print(f"{configfile}: jobs={len(jobs)} dry_run_s={seconds:.1f} sbatch={sum(not local for _, local, _ in jobs)} "
              f"model_loads={sum(loads_a_model(r, w, retrievers) for r, _, w in jobs)} rerank={rules['rerank']}")


if __name__ == "__main__":
    main()
