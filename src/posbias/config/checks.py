"""The config checks the schema cannot express (cross-references, settings, experiments), in the workflow's
order (:func:`prepare`), and loading and checking a config file outside Snakemake (:func:`load`,
``python -m posbias.config``).
"""

from __future__ import annotations

import copy
from pathlib import Path

from posbias import consumers, debias, engines, orders, paths
from posbias.config.expansion import expand_bases, expand_seeds, register_trained_models
from posbias.config.experiments import (
    IMPORTED_PREFIX,
    consumer_of,
    dataset_retrievers,
    decision_targets,
    experiment_key,
    made_here,
    needs_reader,
    orders_of,
    pool_targets,
    retriever_kind,
    variant_of,
)
from posbias.config.effects import check_adaptive, check_references, ignored_setting
from posbias.config.files import check_files, drop_unavailable
from posbias.config.messages import check_duplicate_keys, explain_config
from posbias.config.schema_defaults import defaults, schema
from posbias.engines.python import worker_python
from posbias.errors import PosbiasError
from posbias.rerankers import model_kinds, modes
from posbias.retrieval import kinds


def check_grid(config: dict) -> None:
    """Cross-reference checks the schema cannot express; raises ValueError with one line."""
    for name, spec in config["datasets"].items():
        for retriever in spec.get("retrievers", []):
            if retriever.startswith(IMPORTED_PREFIX):
                run = retriever[len(IMPORTED_PREFIX):]
                if run not in spec.get("runs", {}):
                    raise ValueError(f"config: datasets.{name}.retrievers names {retriever!r} but the dataset has no run {run!r}")
            elif retriever not in config["retrievers"]:
                raise ValueError(
                    f"config: datasets.{name}.retrievers names unknown retriever {retriever!r}; "
                    f"defined: {', '.join(sorted(config['retrievers']))}"
                )
        for retriever in spec.get("prebuilt", {}):
            if retriever not in spec.get("retrievers", []) or retriever_kind(config, retriever) not in kinds.names(True):
                raise ValueError(f"config: datasets.{name}.prebuilt names {retriever!r}, which is not a retriever in "
                                 f"datasets.{name}.retrievers of a kind that searches an index "
                                 f"({', '.join(kinds.names(True))})")
        for retriever in dataset_retrievers(config, name):
            if retriever in config["retrievers"] and "runs" in kinds.get(retriever_kind(config, retriever)).reads:
                for part in config["retrievers"][retriever]["runs"]:
                    if part not in dataset_retrievers(config, name):
                        raise ValueError(
                            f"config: retriever {retriever!r} fuses {part!r}, which dataset {name!r} does not run; "
                            f"add {part!r} to datasets.{name}.retrievers"
                        )
    for name, spec in config["retrievers"].items():
        model = spec.get("model")
        if model and model in config.get("models", {}) and not made_here(config["models"][model]) \
                and not config["models"][model].get("path"):
            raise ValueError(f"config: models.{model} needs a `path` or `build: tiny` (used by retrievers.{name})")


# What changed from each older config_version to the current one (the schema's default); CHANGELOG.md.
CONFIG_CHANGES = {1: "from 1 to 2 nothing was renamed; new are reranking.capcal.placeholder_length and .variants "
                     "(debias capcal@NAME) and models.<m>.identifiers (default letters): check your CapCal "
                     "settings, then set config_version: 2"}


def check_gguf(name: str, spec: dict, files: bool) -> None:
    """A ``gguf:`` block names its file one way, on a causal LM that has no other source; with ``files``,
    the file (or the parts an ``assemble`` package joins) is there (:func:`posbias.gguf.parts`)."""
    block = spec.get("gguf")
    if block is None:
        return
    where = f"config: models.{name}.gguf"
    if not model_kinds.of(spec).prompted:
        raise ValueError(f"{where}: a GGUF file is a causal LM; set kind: {model_kinds.named('prompted')} or drop `gguf`")
    if spec.get("path") or spec.get("build"):
        raise ValueError(f"{where}: the entry also has `{'path' if spec.get('path') else 'build'}`; give one source")
    ways = [way for way in (("path",), ("package", "file"), ("package", "assemble")) if all(block.get(k) for k in way)]
    if len(ways) != 1 or set(block) - {"sha256"} != set(ways[0]):
        raise ValueError(f"{where}: name the file one way: {{package: <module>, file: <name>.gguf}}, "
                         "{package: <module>, assemble: true} or {path: <file>.gguf}")
    if files:
        from posbias.gguf import parts

        try:
            parts(block, name)
        except PosbiasError as exc:
            raise ValueError(f"config: {exc}") from None


def check_settings(config: dict, files: bool = True) -> None:
    """Mistakes the config alone shows, beyond what the schema can say; ValueError with one line
    (``files=False``: the files it names need not exist, for the compute plan's stand-ins)."""
    version, current = config["config_version"], schema()["properties"]["config_version"]["default"]
    if version != current:
        raise ValueError(f"config: config_version {version}: this workflow reads version {current}; "
                         + CONFIG_CHANGES.get(version, "a newer workflow wrote it: update the workflow"))
    if files:
        check_files(config)
        for name, run in config.get("training", {}).items():
            deepspeed = run.get("hyper", {}).get("deepspeed")
            if deepspeed and not Path(deepspeed).expanduser().is_file():
                raise ValueError(f"config: training.{name}.hyper.deepspeed: {deepspeed} is not a file; give the "
                                 "path of a DeepSpeed JSON config (or null)")
    for name, model in config["models"].items():
        engine = engines.ENGINES[model["engine"]] if model_kinds.of(model).prompted else None
        if engine and model["mode"] not in engine.modes:
            raise ValueError(f"config: models.{name}.engine {model['engine']}: mode {model['mode']} runs on "
                             f"transformers only ({engine.why_not}); set engine: transformers")
        python = worker_python(model.get("vllm", defaults("models", "vllm"))["python"])
        if files and engine and model["engine"] == "vllm" and not python.is_file():
            raise ValueError(f"config: models.{name}.vllm.python {python} does not "
                             "exist; run ./posbias.sh vllm (it creates .venv-vllm) or point it at an environment "
                             "with vLLM (docs/usage.md, 'The vLLM engine')")
    rr = config["reranking"]
    if rr["step"] > rr["window"]:
        raise ValueError(f"config: reranking.step {rr['step']} is larger than reranking.window {rr['window']}: "
                         "passages between two windows would never be compared; set step ≤ window")
    import ir_measures

    for measure in config["evaluation"]["measures"]:
        try:
            ir_measures.parse_measure(measure)
        except (ValueError, NameError, SyntaxError, TypeError, AttributeError):
            raise ValueError(f"config: evaluation.measures: {measure!r} is not an ir_measures measure; write it "
                             "as ir_measures does, e.g. nDCG@10, R@100, AP(rel=2)") from None
    for name, spec in config["models"].items():
        path = spec.get("path", "")
        built = Path(path).expanduser().resolve().is_relative_to(Path(paths.MODELS).resolve())
        if path.startswith((".", "/", "~")) and not built and not Path(path).expanduser().is_dir():
            raise ValueError(f"config: models.{name}.path {path}: no such local model folder; fix the path (a hub "
                             "id has no leading ./ or /)")
        check_gguf(name, spec, files)
        target = config["models"].get(path)
        if target is not None and (path == name or target["kind"] != spec["kind"] or "path" in target
                                   and target["path"] in config["models"]):
            raise ValueError(f"config: models.{name}.path {path!r} names "
                             + ("the entry itself" if path == name else
                                f"a {target['kind']} entry" if target["kind"] != spec["kind"] else
                                f"an entry that names another entry ({target['path']!r})")
                             + f"; a path names a {spec['kind']} entry with its own weights (a `path` folder, `build`, "
                               "`gguf`), an HF id or a folder")
        train_on = spec.get("tiny", {}).get("train_on")
        if spec.get("build") and train_on and train_on not in config["datasets"]:
            raise ValueError(f"config: models.{name}.tiny.train_on {train_on!r} is not a datasets entry; "
                             f"use one of {', '.join(config['datasets'])}")
    prop = config.get("propensity", {})
    retriever = config["retrievers"].get(prop.get("retriever", ""))
    if prop.get("model") and retriever and prop["k"] > retriever["depth"]:
        raise ValueError(f"config: propensity.k {prop['k']} is above the depth {retriever['depth']} of retriever "
                         f"{prop['retriever']!r}; lower propensity.k or raise retrievers.{prop['retriever']}.depth")
    for i, e in enumerate(rr["experiments"]):
        depth = e.get("depth", rr["depth"])
        positions = [orders.index_of(o) for o in orders_of(config, e) if orders.is_kind(o, "position")]
        if positions and max(positions) > depth:
            raise ValueError(f"config: reranking.experiments[{i}] asks for position-{max(positions)} but reranks "
                             f"only the top {depth}; drop that order or raise the experiment's depth")


def check_consumers(config: dict) -> None:
    """A multi-document QA experiment needs a reader and gold answers, and the pool design passage
    reranking datasets and a reference among its models; ValueError with one line."""
    for dataset in config["ocsft"]["pool"]["datasets"]:
        if dataset not in config["datasets"] or consumer_of(config, dataset) != consumers.PASSAGE_RERANKING:
            raise ValueError(f"config: ocsft.pool.datasets names {dataset!r}, which is not a passage-reranking "
                             "datasets entry")
    pool = config["ocsft"]["pool"]
    if pool["datasets"] and pool["kept"] >= pool["depth"]:
        raise ValueError(f"config: ocsft.pool.kept {pool['kept']} leaves no companions among the top "
                         f"ocsft.pool.depth {pool['depth']}; keep fewer documents or draw from deeper")
    reader = config["consumers"]["multidoc_qa"]["reader"]
    if reader is not None and reader not in config.get("readers", {}):
        raise ValueError(f"config: consumers.multidoc_qa.reader {reader!r} is not a readers entry; use one of "
                         f"{', '.join(config.get('readers', {})) or '(none: add a readers entry)'}")
    teacher, dev = config["ocsft"]["teacher"], config["ocsft"]["dev"]
    if teacher not in (None, "qrels") and teacher not in config["models"]:
        raise ValueError(f"config: ocsft.teacher {teacher!r} is neither 'qrels' nor a models entry")
    if dev is not None and dev not in config["datasets"]:
        raise ValueError(f"config: ocsft.dev {dev!r} is not a datasets entry; use one of {', '.join(config['datasets'])}")
    reference = pool["reference"]
    if reference is not None and reference not in {m for m, _, _ in pool_targets(config)}:
        raise ValueError(f"config: ocsft.pool.reference names {reference!r}, which scores no pool-design experiment "
                         "(a pointwise experiment on a dataset of ocsft.pool.datasets)")
    for model, dataset, _ in decision_targets(config):
        spec = config["datasets"][dataset]
        if not needs_reader(config, dataset):
            continue
        reader = config["consumers"]["multidoc_qa"]["reader"]
        if reader not in config.get("readers", {}):
            raise ValueError(f"config: consumers.multidoc_qa.reader {reader!r} is not a readers entry, but "
                             f"{model} is evaluated on the multidoc_qa dataset {dataset}; add the reader")
        if "answers" not in spec and spec["source"] not in ("irds", "toy"):
            raise ValueError(f"config: datasets.{dataset} is a multidoc_qa dataset without gold answers; give it "
                             "an `answers` file (JSON Lines of {query_id, answers})")


def check_experiment_data(config: dict) -> None:
    """The dataset and retriever of each reranking experiment as written (before any expansion, so the
    index is the config file's), first: every later check reads the experiment's dataset."""
    for i, e in enumerate(config["reranking"]["experiments"]):
        where = f"reranking.experiments[{i}]"
        if e["dataset"] not in config["datasets"]:
            raise ValueError(f"config: {where}.dataset {e['dataset']!r} is not a datasets entry; use one of "
                             f"{', '.join(config['datasets'])}")
        if e["retriever"] not in dataset_retrievers(config, e["dataset"]):
            raise ValueError(f"config: {where}.retriever {e['retriever']!r} is not run on dataset {e['dataset']!r}")


def check_experiments(config: dict) -> None:
    """Cross-references of reranking experiments; raises ValueError with one line."""
    seen = set()
    for i, e in enumerate(config["reranking"]["experiments"]):
        where = f"reranking.experiments[{i}]"
        model = config["models"].get(e["model"])
        if model is None or not model_kinds.of(model).reranks:
            raise ValueError(f"config: {where}.model {e['model']!r} is not a models entry of kind "
                             f"{model_kinds.named('reranks')}")
        family = modes.family(model)
        for key in ("debias", "position_debias"):
            for name in e.get(key, []):
                try:
                    spec = debias.parse(name)
                    debias.options(config["reranking"], name)  # e.g. a variant that is not defined
                except ValueError as exc:
                    raise ValueError(f"config: {where}.{key}: {exc}") from None
                problem = debias.DEBIAS_METHODS[spec.method].check(family, debias.options(config["reranking"], name))
                if problem:
                    raise ValueError(f"config: {where}.{key}: {name} on {e['model']!r}, a {family} scorer, {problem}")
                if family not in debias.DEBIAS_METHODS[spec.method].families:
                    fits = ", ".join(n for n, m in debias.DEBIAS_METHODS.items() if family in m.families)
                    raise ValueError(f"config: {where}.{key}: {name} does not apply to {e['model']!r}, a {family} "
                                     f"scorer (a pointwise scorer's BSC@K comes from its shuffled orders in the "
                                     f"stability stage); use one of {fits}")
                if spec.level == "list":
                    missing = [o for o in debias.lists(name) if o not in orders_of(config, e)]
                    if key == "position_debias":
                        raise ValueError(f"config: {where}.position_debias: {name} aggregates whole shuffled lists "
                                         "and has no position orders; list it under `debias`")
                    if missing or "none" not in e.get("debias", ["none"]):
                        raise ValueError(f"config: {where}.debias: {name} aggregates the reranked lists of "
                                         f"{', '.join(debias.lists(name))} (debias none); "
                                         + (f"add {', '.join(missing)} to the orders" if missing
                                            else "add none to debias"))
        for name in e.get("orders", []):
            try:
                orders.parse(name)
            except ValueError as exc:
                raise ValueError(f"config: {where}.orders: {exc}") from None
        if experiment_key(e) in seen:
            raise ValueError(f"config: {where} repeats model/dataset/retriever {experiment_key(e)}")
        seen.add(experiment_key(e))
        positions = [orders.index_of(o) for o in orders_of(config, e) if orders.is_kind(o, "position")]
        if positions and max(positions) > config["reranking"]["position_k"]:
            raise ValueError(f"config: {where} asks for position-{max(positions)} beyond reranking.position_k")
    scorers = set(config["models"]) | {variant_of(config["training"], m) for m in config["training"]}
    unknown = [r for r in config["frontier"]["references"] if r not in scorers]
    if unknown:
        raise ValueError(f"config: frontier.references names {', '.join(map(repr, unknown))}, which is neither a "
                         "models nor a training entry")


def prepare(config: dict, files: bool = True) -> list[str]:
    """The checks and expansions of a schema-validated config, in the workflow's order: drop optional
    datasets whose files are missing (returned), check grid and settings, expand bases and seeds, register trained
    models, check the experiments. Raises ValueError with one line. ``files=False`` neither checks the
    files the config names nor drops optional datasets (the compute plan's stand-ins replace them)."""
    dropped = drop_unavailable(config) if files else []
    check_grid(config)
    check_experiment_data(config)
    check_settings(config, files)
    expand_bases(config)
    expand_seeds(config)
    register_trained_models(config)
    check_experiments(config)
    check_consumers(config)
    return dropped


def validate(config: dict) -> None:
    """Check ``config`` against the schema and fill every default it states, in place (also inside
    ``if``/``then`` branches: the defaults of a ``models`` entry depend on its kind); ValueError with
    :func:`explain_config`'s one line otherwise. The jsonschema recipe for defaults (its FAQ), as
    Snakemake's ``validate`` applies it, without needing a workflow."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def with_defaults(validator, properties, instance, node):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from check_properties(validator, properties, instance, node)

    filling = jsonschema.validators.extend(base, {"properties": with_defaults})
    asked_adaptive = isinstance(config, dict) and bool((config.get("ocsft") or {}).get("adaptive"))
    ignored = ignored_setting(config)
    if not filling(schema()).is_valid(config):
        raise ValueError(explain_config(config, schema()))
    if ignored:
        raise ValueError(ignored)
    if asked_adaptive:
        check_adaptive(config)
    check_references(config)


def load(path: str | Path, files: bool = True) -> dict:
    """A config file as the workflow sees it (outside Snakemake: the compute plan's tools, tests):
    validated against the schema with its defaults filled, then :func:`prepare`-d."""
    import yaml

    check_duplicate_keys([path])
    config = yaml.safe_load(Path(path).read_text())
    validate(config)
    prepare(config, files)
    return config


def main(argv: list[str] | None = None) -> int:
    """``python -m posbias.config FILE …``: check config files as the workflow will (YAML syntax with the
    line, duplicate keys, the schema, the cross-references and the files they name), one line per file.
    Snakemake reports a YAML syntax error in a ``--configfile`` without its line; this gives it."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m posbias.config", description=main.__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--no-files", action="store_true", help="do not check the data files the config names")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.files:
        try:
            config = load(path, files=not args.no_files)
        except (ValueError, OSError, PosbiasError) as exc:
            message = str(exc).removeprefix("config: ")
            print(message if message.startswith(str(path)) else f"{path}: {message}")
            failed += 1
            continue
        print(f"{path}: ok ({len(config['datasets'])} datasets, {len(config['reranking']['experiments'])} "
              f"reranking experiments, {len(config.get('training', {}))} training runs)")
    return 1 if failed else 0
