"""Config helpers the Snakefile uses: one-line validation messages and the experiment grid.

Validation itself is Snakemake's ``validate`` against ``config/schema.yaml`` (which also fills
defaults); :func:`explain` turns its jsonschema error into one line naming the key, the problem
and the fix, with a "did you mean" for mistyped keys.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from pathlib import Path

from posbias import consumers, debiasing, engines, methods, orders
from posbias.rerankers import modes
from posbias.retrieval import kinds
from posbias.errors import PosbiasError
from posbias.textfiles import require_file

IMPORTED_PREFIX = "imported:"
SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


@functools.cache
def schema() -> dict:
    """The config schema (config/schema.yaml): the one place where every default is stated."""
    import yaml

    return yaml.safe_load(SCHEMA.read_text())


def schema_node(*path: str) -> dict:
    """The schema of the config object at ``path`` (through named entries: ``("training", "hyper")``)."""
    node = schema()
    for key in path:
        props = node.get("properties", {})
        node = props[key] if key in props else node["additionalProperties"]["properties"][key]
    return node


def defaults(*path: str) -> dict:
    """The schema's defaults of the config object at ``path``, nested defaults filled in.

    ``defaults("reranking")`` is what an empty ``reranking:`` section validates to;
    ``defaults("training", "hyper")`` the trainer settings. Code outside the workflow (tests,
    benches) takes its settings from here instead of restating them.
    """
    node = schema_node(*path)
    return fill_defaults(node, copy.deepcopy(node.get("default", {})))


def entry_defaults(section: str, field: str, value: str) -> dict:
    """The schema's defaults of a named entry of ``section`` whose ``field`` is ``value``: the
    entry's own defaults and those of the ``allOf`` branches that apply (e.g. a dataset's ``source``)."""
    node = schema_node(section)["additionalProperties"]
    out = {k: copy.deepcopy(v["default"]) for k, v in node.get("properties", {}).items() if "default" in v}
    for branch in node.get("allOf", []):
        condition = branch["if"]["properties"][field]
        if condition.get("const") == value or value in condition.get("enum", []):
            out |= {k: copy.deepcopy(v["default"]) for k, v in branch["then"].get("properties", {}).items()
                    if "default" in v}
    return out


def model_defaults(kind: str) -> dict:
    """The schema's defaults of a ``models:`` entry of this ``kind``."""
    return entry_defaults("models", "kind", kind)


def fill_defaults(node: dict, value):
    """``value`` with the defaults of ``node``'s properties added where missing, recursively."""
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = fill_defaults(sub, value[key])
    return value


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def explain(error) -> str:
    """One line for a ``jsonschema.ValidationError`` raised while validating the config."""
    where = _dotted(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        prefix = "" if where == "(top level)" else f"{where}."
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            hints.append(f"{prefix}{key}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return (
            f"config: unknown key {', '.join(hints)}; allowed keys here: {', '.join(allowed)} "
            "(see config/README.md)"
        )
    if error.validator == "required":
        return f"config: {where} is missing a required key: {error.message} (see config/README.md)"
    hint = _yaml_number_hint(error)
    return f"config: {where}: {error.message}{hint} (see config/schema.yaml)"


_EXPONENT = re.compile(r"[-+]?\d+[eE][-+]?\d+")  # what YAML 1.1 leaves a string: no decimal point


def _yaml_number_hint(error) -> str:
    """Where a number was expected and YAML read a string such as ``1e-3`` (YAML 1.1, PyYAML's, reads
    an exponent without a decimal point as a string): how to write it so it is read as a number."""
    expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    if error.validator != "type" or not {"number", "integer"} & set(expected):
        return ""
    return exponent_hint(error.instance)


def exponent_hint(text) -> str:
    """``; YAML reads 1e-3 as a string: write 1.0e-3`` where ``text`` is such a string, else ``""`` (also
    for the compute plan's throughput table, which is YAML too)."""
    if not isinstance(text, str) or not _EXPONENT.fullmatch(text.strip()):
        return ""
    mantissa, exponent = re.split("[eE]", text.strip())
    return f"; YAML reads {text} as a string: write {mantissa}.0e{exponent}"


def explain_config(config: dict, schema: dict) -> str | None:
    """The most useful one-line message among all schema violations of ``config`` (None if valid).

    Unknown keys come first (a typo also makes a required key look missing), then missing keys.
    """
    import jsonschema

    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if not errors:
        return None
    flat = []
    while errors:
        error = errors.pop()
        flat.append(error)
        errors.extend(error.context or [])
    rank = {"additionalProperties": 0, "required": 1}
    flat.sort(key=lambda e: (rank.get(e.validator, 2), -len(e.absolute_path)))
    return explain(flat[0])


def dataset_retrievers(config: dict, dataset: str) -> list[str]:
    """The retrievers run on ``dataset``: its imported runs, then its configured ``retrievers``."""
    spec = config["datasets"][dataset]
    imported = [f"{IMPORTED_PREFIX}{name}" for name in spec.get("runs", {})]
    return imported + [r for r in spec.get("retrievers", []) if r not in imported]


def prebuilt_index(config: dict, dataset: str, retriever: str) -> str | None:
    """The pyserini prebuilt index a retriever searches on a dataset, if the config names one."""
    return config["datasets"][dataset].get("prebuilt", {}).get(retriever)


def retriever_kind(config: dict, retriever: str) -> str:
    if retriever.startswith(IMPORTED_PREFIX):
        return "imported"
    return config["retrievers"][retriever]["kind"]


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
        if model and model in config.get("models", {}) and not config["models"][model].get("build") \
                and not config["models"][model].get("path"):
            raise ValueError(f"config: models.{model} needs a `path` or `build: tiny` (used by retrievers.{name})")


_FILE_KEYS = ("path", "topics", "qrels", "corpus", "answers")
# What a dataset entry says about other stages (which retrievers run on it, their prebuilt indexes,
# whether it may be skipped, which consumer reads its scores and the gold answers, read by the
# `answers` job): not read by the data stage, so editing them reruns no data job.
_NOT_DATA_KEYS = ("retrievers", "prebuilt", "optional", "consumer", "answers")


def named_files(spec: dict) -> list[tuple[str, str, str]]:
    """(config key, what it is, path) of every local file a dataset entry names, as the data stage reads
    them (a BEIR folder's three files); none for ir_datasets (keyed by id) and the generated sources."""
    if spec["source"] == "beir":
        root = Path(spec["path"])
        return [("path", "corpus", str(root / "corpus.jsonl")), ("path", "queries", str(root / "queries.jsonl")),
                ("path", "qrels", str(root / "qrels" / f"{spec['split']}.tsv"))]
    whats = {"path": spec["source"], "topics": "topics", "qrels": "qrels", "corpus": "corpus", "answers": "answers"}
    return ([(k, whats[k], spec[k]) for k in _FILE_KEYS if k in spec]
            + [(f"runs.{name}", "run", r["path"]) for name, r in spec.get("runs", {}).items()])


def dataset_files(spec: dict) -> list[str]:
    """The local files a dataset entry names (:func:`named_files`) but its gold answers: the inputs of
    its data jobs (the answers are the ``answers`` job's)."""
    return [path for key, _, path in named_files(spec) if key != "answers"]


def qrels_file(spec: dict) -> str | None:
    """The qrels file of a dataset whose judgements are a file of their own (trec, imported, beir), so
    they are prepared by a job of their own (rule ``prepare_qrels``) and editing a grade does not
    rewrite the corpus (and re-index); None where the judgements come with the texts (an ir_datasets
    id, a generated or listwise set) or decide them (``sample_queries`` samples judged queries)."""
    if spec.get("sample_queries"):
        return None
    return next((path for _, what, path in named_files(spec) if what == "qrels"), None)


def text_files(spec: dict) -> list[str]:
    """The files the data job of a dataset reads for its corpus and queries: all but its own qrels file."""
    return [path for path in dataset_files(spec) if path != qrels_file(spec)]


def check_files(config: dict) -> None:
    """Every local file the datasets name exists and is a file: refused before any job otherwise (the
    same one-line messages the data stage would give, naming the config key)."""
    for name, spec in config["datasets"].items():
        if spec["source"] == "beir":
            root = Path(spec["path"]).expanduser()
            qrels = root / "qrels"
            if not root.is_dir():
                raise ValueError(f"config: datasets.{name}.path: BEIR folder {spec['path']} does not exist")
            if not (qrels / f"{spec['split']}.tsv").is_file():
                found = sorted(p.name for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
                raise ValueError(f"config: datasets.{name}: BEIR folder {spec['path']} has no qrels/{spec['split']}.tsv "
                                 f"(found {found or 'no qrels folder'}); add the qrels or set `split` to one that exists")
        for key, what, path in named_files(spec):
            try:
                require_file(path, what, f"datasets.{name}.{key}")
            except PosbiasError as exc:
                raise ValueError(f"config: {exc}") from None


def data_settings(spec: dict) -> dict:
    """The keys of a dataset entry the data stage reads."""
    return canonical({k: v for k, v in spec.items() if k not in _NOT_DATA_KEYS})


def check_duplicate_keys(paths) -> None:
    """A key written twice in one mapping of a YAML config file is an error (PyYAML keeps the last one
    silently); ValueError naming the file, both lines and the key."""
    import yaml

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` merges; an explicit key after it overrides on purpose
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise ValueError(f"config: {self.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice "
                                     f"in one mapping (first at line {seen[key]}); the last one would silently win: "
                                     "keep one")
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    for path in paths:
        with open(path, encoding="utf-8") as handle:
            try:
                yaml.load(handle, Loader=Strict)  # noqa: S506 (a SafeLoader subclass)
            except yaml.MarkedYAMLError as exc:
                raise ValueError(f"config: {yaml_syntax(path, exc)}") from None


def yaml_syntax(path, exc) -> str:
    """One line for a YAML syntax error: the file, the line and column where the parser gave up, what it
    found, and the usual causes."""
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    context = exc.context and (f"{exc.context} started at line {exc.context_mark.line + 1}" if exc.context_mark
                               else exc.context)
    what = "; ".join(str(part) for part in (context, exc.problem) if part)
    return (f"{where}: not valid YAML ({what}); check the indentation (spaces, no tabs) and the "
            "brackets and quotes of this line and the one before")


# What changed from each older config_version to the current one (the schema's default); CHANGELOG.md.
CONFIG_CHANGES = {1: "from 1 to 2 nothing was renamed; new are reranking.capcal.placeholder_length and .variants "
                     "(debias capcal@NAME) and models.<m>.identifiers (default letters): check your CapCal "
                     "settings, then set config_version: 2"}


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
        engine = engines.ENGINES[model["engine"]] if model["kind"] == "causal_lm" else None
        if engine and model["mode"] not in engine.modes:
            raise ValueError(f"config: models.{name}.engine {model['engine']}: mode {model['mode']} runs on "
                             f"transformers only ({engine.why_not}); set engine: transformers")
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
        built = Path(path).expanduser().resolve().is_relative_to(Path("results/models").resolve())
        if path.startswith((".", "/", "~")) and not built and not Path(path).expanduser().is_dir():
            raise ValueError(f"config: models.{name}.path {path}: no such local model folder; fix the path (a hub "
                             "id has no leading ./ or /)")
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
        positions = [int(o.split("-")[1]) for o in orders_of(config, e) if o.startswith("position-")]
        if positions and max(positions) > depth:
            raise ValueError(f"config: reranking.experiments[{i}] asks for position-{max(positions)} but reranks "
                             f"only the top {depth}; drop that order or raise the experiment's depth")


def drop_unavailable(config: dict) -> list[str]:
    """Remove ``optional`` datasets whose local files are missing (and experiments on them); return their names."""
    dropped = []
    for name, spec in list(config["datasets"].items()):
        if not spec.get("optional"):
            continue
        if any(not Path(f).expanduser().exists() for f in dataset_files(spec)):
            dropped.append(name)
            del config["datasets"][name]
    rr = config.get("reranking", {})
    rr["experiments"] = [e for e in rr.get("experiments", []) if e["dataset"] not in dropped]
    return dropped


def orders_of(config: dict, experiment: dict) -> list[str]:
    """The evaluation orders of one reranking experiment: its ``orders``, else the original order, the
    shuffles and the position orders (these only for passage reranking: the other consumers' decisions
    are measured over shuffles, and a response set has fewer candidates than positions)."""
    if "orders" in experiment:
        return list(experiment["orders"])
    rr = config["reranking"]
    positions = rr["positions"] if consumer_of(config, experiment["dataset"]) == consumers.PASSAGE_RERANKING else 0
    return (["original"] + [f"shuffled-{s}" for s in range(rr["shuffles"])]
            + [f"position-{p}" for p in range(1, positions + 1)])


def experiment_key(experiment: dict) -> tuple[str, str, str]:
    return experiment["model"], experiment["dataset"], experiment["retriever"]


def orders_for(config: dict, experiment: dict, debias: str) -> list[str]:
    """The orders a debiasing method runs on: original and shuffled, plus positions if in ``position_debias``;
    a list-level method (PermSC over K reranked shuffles) has one result, written as ``original``."""
    if debiasing.parse(debias).level == "list":
        return ["original"]
    with_positions = debias in experiment.get("position_debias", ["none"])
    return [o for o in orders_of(config, experiment) if with_positions or not o.startswith("position-")]


def find_experiment(config: dict, model: str, dataset: str, retriever: str) -> dict:
    """The reranking experiment of (model, dataset, retriever)."""
    return next(e for e in config["reranking"]["experiments"] if experiment_key(e) == (model, dataset, retriever))


def rerank_settings(config: dict, model: str, dataset: str, retriever: str, debias: str, part: str) -> dict:
    """What one ``rerank`` job (a batch of orders, :func:`rerank_batches`) reads from the config, and
    nothing else: its experiment's depth and query limit, the window and step, the position protocol's
    keys for a batch of position orders, the word budget for a model that reads passage text, and its
    debiasing method's settings. A job's params are exactly this and its orders, so adding an experiment
    or editing a key the job does not read reruns none of it."""
    rr = config["reranking"]
    experiment = find_experiment(config, model, dataset, retriever)
    out = {"depth": experiment.get("depth", rr["depth"]), "queries": experiment.get("queries"),
           "window": rr["window"], "step": rr["step"], "debias": debiasing.options(rr, debias)}
    if part.startswith("position"):
        out |= {"relevant_grade": rr["relevant_grade"], "position_k": rr["position_k"]}
    if config["models"][model]["kind"] == "causal_lm":
        out["word_budget"] = rr["word_budget"]
    if is_pointwise(config, model) and consumer_window(config, dataset):
        out["grade_window"] = consumer_window(config, dataset)
    return canonical(out)


def consumer_of(config: dict, dataset: str) -> str:
    """The consumer that reads pointwise scores on ``dataset`` (:mod:`posbias.consumers`)."""
    return config["datasets"][dataset].get("consumer", consumers.PASSAGE_RERANKING)


def needs_reader(config: dict, dataset: str) -> bool:
    """Whether ``dataset``'s consumer reads retention sets with a reader (and needs gold answers)."""
    return consumers.get(consumer_of(config, dataset)).reader


def consumer_window(config: dict, dataset: str) -> int | None:
    """The Grades window B of ``dataset``'s consumer, None for passage reranking (whose B is the
    model's ``grade_window`` when scoring and ``ocsft.window`` when silver-labelling)."""
    consumer = consumer_of(config, dataset)
    return None if consumer == consumers.PASSAGE_RERANKING else config["consumers"][consumer]["window"]


def silver_retriever(config: dict, dataset: str) -> str:
    """The first-stage run whose top-depth the teacher scores on ``dataset``: ``ocsft.retriever``, or
    its entry for the dataset when it maps datasets to retrievers."""
    choice = config["ocsft"]["retriever"]
    if isinstance(choice, str):
        return choice
    if dataset not in choice:
        raise ValueError(f"config: ocsft.retriever names no retriever for dataset {dataset!r}; add `{dataset}: "
                         f"<retriever>` (it has {dataset_retrievers(config, dataset)})")
    return choice[dataset]


def silver_window(config: dict, dataset: str) -> int:
    """Documents per teacher prompt when silver-labelling ``dataset``: its consumer's B, else ``ocsft.window``."""
    return consumer_window(config, dataset) or config["ocsft"]["window"]


def pool_targets(config: dict) -> list[tuple[str, str, str]]:
    """Every pointwise experiment on a dataset of ``ocsft.pool.datasets`` (the ``pool_design`` rule)."""
    datasets = config["ocsft"]["pool"]["datasets"]
    return [experiment_key(e) for e in config["reranking"]["experiments"]
            if is_pointwise(config, e["model"]) and e["dataset"] in datasets]


def decision_targets(config: dict) -> list[tuple[str, str, str]]:
    """Every pointwise experiment with two or more shuffled orders whose dataset's consumer takes
    decisions (the ``decisions`` rule)."""
    stable = {target[:3] for target in stability_targets(config)}
    return [experiment_key(e) for e in config["reranking"]["experiments"] if experiment_key(e) in stable
            and is_pointwise(config, e["model"]) and consumer_of(config, e["dataset"]) in consumers.with_decisions()]


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


def rerank_batches(config: dict) -> dict[tuple[str, str, str, str, str], list[str]]:
    """Every ``rerank`` job, (model, dataset, retriever, debias, part) → the orders it reranks with one
    model load. Position orders and the original/shuffled orders are separate parts (the position
    protocol's keys rerun only the former), each cut into parts of at most
    ``reranking.orders_per_job`` orders in the experiment's order (``list-0``, ``list-1``,
    ``position-0``, …), so appending shuffles leaves the earlier parts' jobs as they were. List-level
    methods (PermSC) call no model and have no batch."""
    size = config["reranking"]["orders_per_job"]
    grouped: dict[tuple[str, str, str, str, str], list[str]] = {}
    for m, d, r, order, b in rerank_grid(config):
        if debiasing.parse(b).level == "window":
            kind = "position" if orders.parse(order).kind == "position" else "list"
            grouped.setdefault((m, d, r, b, kind), []).append(order)
    return {(*key[:4], f"{key[4]}-{i // size}"): names[i:i + size]
            for key, names in grouped.items() for i in range(0, len(names), size)}


def canonical(value):
    """``value`` with every mapping's keys sorted, recursively: Snakemake compares params by ``repr``,
    so a rule's params must not depend on the order keys were written in the config."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def position_settings(config: dict, model: str, dataset: str, retriever: str, debias: str) -> dict:
    """The position protocol's keys for a summary whose orders include position orders, else nothing."""
    rr = config["reranking"]
    experiment = find_experiment(config, model, dataset, retriever)
    if not any(o.startswith("position-") for o in orders_for(config, experiment, debias)):
        return {}
    return {"position_k": rr["position_k"], "relevant_grade": rr["relevant_grade"]}


# Trainer settings that change how a run is logged and checkpointed, not the model it trains: the train
# job reads them from the config, not its params, so editing them retrains nothing.
TRAIN_OPERATIONAL = ("logging_steps", "save_steps", "save_total_limit")


def model_settings(config: dict, model: str) -> dict:
    """A models entry as a job's params: keys sorted (their order in the file is not a change), and the
    engine only where it is not the default, so that results made before the key existed stay current
    (rerunning every reranking job, and retraining what reads the propensity estimate, to be told that
    transformers ran them would cost days on a cluster)."""
    spec = dict(config["models"][model])
    if spec.get("engine") == model_defaults("causal_lm")["engine"]:
        del spec["engine"]
    return canonical(spec)


def train_settings(config: dict, name: str) -> dict:
    """What a ``train`` job's result depends on: its training entry without the operational trainer
    settings and without the list of sibling seeds (adding a seed trains only the new one), and its
    GPUs as the processes it trains in: 0 (a CPU job) and 1 train in one process alike, so moving a
    job onto one GPU does not retrain it."""
    run = config["training"][name]
    hyper = {k: v for k, v in run["hyper"].items() if k not in TRAIN_OPERATIONAL}
    settings = {k: v for k, v in run.items() if k not in ("seeds", "hyper")} | {"hyper": hyper}
    return canonical(settings | {"gpus": max(1, run["gpus"])})


def training_labels(config: dict) -> dict:
    """What the paper tables and figures read of the training entries: method, augmentation and, for
    seeded models, the entry they are a seed of and the seed."""
    return {name: {k: run[k] for k in ("method", "aug", "variant", "seed") if k in run}
            for name, run in config.get("training", {}).items()}


def rerank_grid(config: dict) -> list[tuple[str, str, str, str, str]]:
    """Every (model, dataset, retriever, order, debias) the reranking experiments ask for."""
    out = []
    for e in config["reranking"]["experiments"]:
        methods = list(dict.fromkeys(e.get("debias", ["none"]) + e.get("position_debias", ["none"])))
        for debias in methods:
            out += [(*experiment_key(e), order, debias) for order in orders_for(config, e, debias)]
    return out


def summaries(config: dict) -> list[tuple[str, str, str, str]]:
    """Every (model, dataset, retriever, debias) that gets a summary."""
    return list(dict.fromkeys((m, d, r, b) for m, d, r, _, b in rerank_grid(config)))


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
        if model is None or model["kind"] not in ("causal_lm", "simulated"):
            raise ValueError(f"config: {where}.model {e['model']!r} is not a models entry of kind causal_lm or simulated")
        family = modes.family(model)
        for key in ("debias", "position_debias"):
            for name in e.get(key, []):
                try:
                    spec = debiasing.parse(name)
                    debiasing.options(config["reranking"], name)  # e.g. a variant that is not defined
                except ValueError as exc:
                    raise ValueError(f"config: {where}.{key}: {exc}") from None
                if family not in debiasing.METHODS[spec.method].families:
                    fits = ", ".join(n for n, m in debiasing.METHODS.items() if family in m.families)
                    raise ValueError(f"config: {where}.{key}: {name} does not apply to {e['model']!r}, a {family} "
                                     f"scorer (a pointwise scorer's BSC@K comes from its shuffled orders in the "
                                     f"stability stage); use one of {fits}")
                if spec.level == "list":
                    missing = [o for o in debiasing.lists(name) if o not in orders_of(config, e)]
                    if key == "position_debias":
                        raise ValueError(f"config: {where}.position_debias: {name} aggregates whole shuffled lists "
                                         "and has no position orders; list it under `debias`")
                    if missing or "none" not in e.get("debias", ["none"]):
                        raise ValueError(f"config: {where}.debias: {name} aggregates the reranked lists of "
                                         f"{', '.join(debiasing.lists(name))} (debias none); "
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
        positions = [int(o.split("-")[1]) for o in orders_of(config, e) if o.startswith("position-")]
        if positions and max(positions) > config["reranking"]["position_k"]:
            raise ValueError(f"config: {where} asks for position-{max(positions)} beyond reranking.position_k")


def silver_teacher(config: dict, run: dict) -> str:
    """The teacher of a pointwise run: its own ``teacher``, else ``ocsft.teacher``, else its base model."""
    return run.get("teacher") or config.get("ocsft", {}).get("teacher") or run["base_model"]


def silver_shuffles(config: dict, run: dict) -> int:
    """Teacher shuffles T a pointwise run needs (0: first-stage order only)."""
    return config["ocsft"]["shuffles"] if methods.get(run["method"]).shuffled_silver else 0


def silver_path(config: dict, run: dict) -> str:
    return f"results/silver/{run['data']}/{silver_teacher(config, run)}/t{silver_shuffles(config, run)}.parquet"


def is_pointwise(config: dict, model: str) -> bool:
    """Whether ``model`` is a reranker of a pointwise mode (:mod:`posbias.rerankers.modes`): a score per passage."""
    spec = config["models"].get(model, {})
    return "mode" in spec and modes.family(spec) == "pointwise"


def stability_targets(config: dict) -> list[tuple[str, str, str, str]]:
    """Every (model, dataset, retriever, debias) whose decision stability is measured, among the
    experiments with at least two shuffled orders: each window-level debiasing method of each (for
    ``none`` also K > 1 rows from its shuffled orders: BSC@K of a pointwise scorer, PermSC@K of a
    listwise one)."""
    out = []
    for e in config["reranking"]["experiments"]:
        if sum(o.startswith("shuffled-") for o in orders_of(config, e)) < 2:
            continue  # stability needs two presentations
        out += [(*experiment_key(e), d) for d in dict.fromkeys(e.get("debias", ["none"]))
                if debiasing.parse(d).level != "list"]
    return list(dict.fromkeys(out))


def listwise_datasets(config: dict) -> list[str]:
    """Datasets that carry listwise training instances."""
    return [name for name, spec in config["datasets"].items()
            if spec["source"] == "listwise" or (spec["source"] in ("synthetic", "toy") and spec.get("split") == "train")]


def _expand_experiments(config: dict, expanded: dict[str, list[str]]) -> None:
    """Replace each reranking experiment on a model in ``expanded`` by one per model it expanded to."""
    rr = config.get("reranking", {})
    rr["experiments"] = [{**e, "model": model} for e in rr.get("experiments", [])
                         for model in expanded.get(e["model"], [e["model"]])]


def expand_bases(config: dict) -> None:
    """Replace each training entry with ``base_models: [a, …]`` by one entry ``<name>-<a>`` per base (its
    ``base_model``; seeds expand after, ``<name>-<a>-s<seed>``), and each reranking experiment on
    ``<name>`` by one per base's entry: the same recipe fine-tuned from several base models, each its own
    variant (the pooled-over-bases figure, :func:`base_pairs`, pairs them per base). An entry gives
    ``base_model`` or ``base_models``, not both; the bases are ``models`` entries (a run that continues
    from another training entry names it in ``base_model``)."""
    training = config.get("training", {})
    expanded: dict[str, list[str]] = {}
    for name in list(training):
        run = training.pop(name)
        bases = run.pop("base_models", None)
        if (bases is None) == ("base_model" not in run):
            raise ValueError(f"config: training.{name}: give base_model (one base) or base_models (a list), "
                             "exactly one of them")
        if bases is None:
            training[name] = run
            continue
        expanded[name] = [f"{name}-{base}" for base in bases]
        for base, model in zip(bases, expanded[name]):
            if base not in config.get("models", {}):
                raise ValueError(f"config: training.{name}.base_models: {base!r} is not a models entry (a run "
                                 "that continues from another training entry names it in base_model)")
            if model in training or model in config.get("models", {}):
                raise ValueError(f"config: training.{name} on base {base} makes the model name {model!r}, "
                                 "which is already taken; rename one of them")
            training[model] = {**run, "base_model": base}
    _expand_experiments(config, expanded)


def base_pairs(config: dict) -> list[dict[str, str]]:
    """The pooled-over-bases comparison: per base model and training data, the OC-SFT variant and the
    single-order variant trained from that base on that data (:attr:`posbias.methods.TrainingMethod.on_lambda_grid`
    with and without the penalty), as ``{"base", "data", "ocsft", "single"}``. A base is the
    ``models`` entry a variant's chain of ``base_model`` ends at. ``training`` after :func:`expand_seeds`."""
    training = config.get("training", {})

    def root(model: str) -> str:
        while model in training:
            model = training[model]["base_model"]
        return model

    roles: dict[tuple[str, str], dict[str, str]] = {}
    for name, run in training.items():
        method = methods.get(run["method"])
        if not method.on_lambda_grid:
            continue
        role = "ocsft" if method.consistency else "single"
        roles.setdefault((root(run["base_model"]), run["data"]), {}).setdefault(role, variant_of(training, name))
    return [{"base": base, "data": data, **found} for (base, data), found in roles.items()
            if {"ocsft", "single"} <= set(found)]


def expand_seeds(config: dict) -> None:
    """Replace each training entry with ``seeds: [s, …]`` by one entry ``<name>-s<s>`` per seed (with
    ``seed`` and ``variant: <name>``), and each reranking experiment on ``<name>`` by one per seed's model.
    A seeded entry whose ``base_model`` is another seeded entry continues from that entry's model of
    the same seed.

    The seed is part of the model's name, so every downstream file path carries it like any other
    model; :func:`variant_of` maps a model back to the training entry it is a seed of.
    """
    training = config.get("training", {})
    expanded: dict[str, list[str]] = {}
    for name in list(training):
        run = training.pop(name)
        seeds = run.pop("seeds", None)
        if seeds is None:
            training[name] = run
            continue
        expanded[name] = [f"{name}-s{seed}" for seed in seeds]
        for seed, model in zip(seeds, expanded[name]):
            if model in training or model in config.get("models", {}):
                raise ValueError(f"config: training.{name} seed {seed} makes the model name {model!r}, "
                                 "which is already taken; rename one of them")
            training[model] = {**run, "seed": seed, "variant": name}
    for name, models in expanded.items():
        for model in models:
            run = training[model]
            if run["base_model"] in expanded:
                base = f"{run['base_model']}-s{run['seed']}"
                if base not in training:
                    raise ValueError(f"config: training.{name} (seed {run['seed']}) continues from "
                                     f"{run['base_model']!r}, which has no seed {run['seed']}; give both the same seeds")
                run["base_model"] = base
    _expand_experiments(config, expanded)


def variant_of(training: dict, model: str) -> str:
    """The training entry a model is one seed of (``training.<name>.seeds``), else the model itself;
    ``training`` is the config's ``training`` block after :func:`expand_seeds`."""
    return training.get(model, {}).get("variant", model)


def ocsft_variants(config: dict) -> list[str]:
    """The OC-SFT variants (training entries whose method has the order-consistency penalty and
    supervises the anchor), in config order, each seeded entry once."""
    out = [variant_of(config["training"], name) for name, run in config.get("training", {}).items()
           if methods.get(run["method"]).consistency and methods.get(run["method"]).on_lambda_grid]
    return list(dict.fromkeys(out))


def ocsft_reference(config: dict) -> str | None:
    """The variant the OC-SFT table tests every other pointwise scorer against: the first OC-SFT
    variant (:func:`ocsft_variants`)."""
    return next(iter(ocsft_variants(config)), None)


def pointwise_settings(config: dict) -> dict[str, dict]:
    """Per pointwise training entry (a variant, its seeds counted once): its method, λ (0 without the
    penalty), views N (1 for single-view methods) and whether it is on OC-SFT's λ grid
    (:attr:`posbias.methods.TrainingMethod.on_lambda_grid`), as the OC-SFT settings table reads them."""
    out = {}
    for name, run in config.get("training", {}).items():
        method = methods.get(run["method"])
        if method.pointwise:
            views = run["hyper"]["views"] if method.views == "anchor+permutations" else 1
            out[variant_of(config["training"], name)] = {
                "method": method.name, "lambda": run["hyper"]["consistency"] if method.consistency else 0.0,
                "views": views, "grid": method.on_lambda_grid}
    return out


def check_hyper(hyper: dict) -> None:
    """What the schema cannot say of a ``training.<name>.hyper`` block (its defaults filled); ValueError
    with one line. The config check calls it before any job, a TrainSpec on construction."""
    if hyper.get("lm_softmax") == "identifiers" and hyper.get("lm_tokens") != 1:
        raise ValueError("lm_softmax: identifiers scores the first answer token only; set lm_tokens: 1")


def register_trained_models(config: dict) -> None:
    """Make every ``training`` entry a causal_lm model at ``results/models/<name>``, in its base's mode.

    Raises ValueError with one line on a bad cross-reference.
    """
    pending = dict(config.get("training", {}))
    while pending:  # a run may continue from another run's model: register bases first
        ready = [n for n, r in pending.items() if r["base_model"] not in pending]
        if not ready:
            raise ValueError(f"config: training entries {sorted(pending)} continue from each other in a cycle")
        for name in ready:
            _register(config, name, pending.pop(name))
    _check_propensity(config)


def _register(config: dict, name: str, run: dict) -> None:
    """Check one training entry's cross-references and add its model to ``models``."""
    where = f"config: training.{name}"
    try:
        method = methods.get(run["method"])
    except ValueError as exc:
        raise ValueError(f"{where}.method: {exc}") from None
    try:
        check_hyper(run["hyper"])
    except ValueError as exc:
        raise ValueError(f"{where}.hyper.{exc}") from None
    base = config["models"].get(run["base_model"])
    if base is None or base["kind"] != "causal_lm":
        raise ValueError(f"{where}.base_model {run['base_model']!r} is not a models entry of kind causal_lm")
    if method.family != modes.family(base):
        raise ValueError(f"{where}: method {run['method']!r} needs a base model of a {method.family} mode "
                         f"({', '.join(modes.names(method.family))}); {run['base_model']!r} is in mode {base['mode']!r}")
    if method.pointwise:
        teacher = silver_teacher(config, run)
        if teacher != "qrels" and not (teacher in config["models"] and is_pointwise(config, teacher)):
            raise ValueError(f"{where}: silver-label teacher {teacher!r} is neither 'qrels' nor a models entry of a "
                             f"pointwise mode ({', '.join(modes.names('pointwise'))})")
        if run["data"] not in config["datasets"]:
            raise ValueError(f"{where}.data {run['data']!r} is not a datasets entry")
        if silver_retriever(config, run["data"]) not in dataset_retrievers(config, run["data"]):
            raise ValueError(f"{where}: ocsft.retriever {silver_retriever(config, run['data'])!r} is not run on "
                             f"{run['data']!r}")
    elif base.get("identifiers", "letters") != "letters":
        raise ValueError(f"{where}.base_model {run['base_model']!r} uses {base['identifiers']} identifiers; listwise "
                         "training reads one letter token per passage ([A] … [T]): set its identifiers to letters")
    elif run["data"] not in listwise_datasets(config):
        raise ValueError(f"{where}.data {run['data']!r} has no listwise training instances "
                         "(use a `listwise` dataset or a synthetic `train` split)")
    if method.needs_omega and not config.get("propensity", {}).get("model"):
        raise ValueError(f"{where}: method {run['method']!r} needs a propensity estimate; set propensity.model")
    if name in config["models"]:
        raise ValueError(f"{where}: the name is already a models entry; trained models need their own names")
    config["models"][name] = {**{k: base[k] for k in ("dtype", "max_context", "attn_implementation",
                                                     "trust_remote_code", "batch_size", "grade_window", "prompt", "identifiers", "params_b",
                                                     "engine", "vllm")
                                 if k in base},
                              "kind": "causal_lm", "mode": base["mode"], "path": f"results/models/{name}",
                              "trained": True}


def _check_propensity(config: dict) -> None:
    prop = config.get("propensity", {})
    if prop.get("model"):
        if prop["model"] not in config["models"] or config["models"][prop["model"]]["kind"] not in ("causal_lm", "simulated"):
            raise ValueError(f"config: propensity.model {prop['model']!r} is not a causal_lm or simulated model")
        if prop.get("dataset") not in config["datasets"]:
            raise ValueError(f"config: propensity.dataset {prop.get('dataset')!r} is not a datasets entry")
        if prop["retriever"] not in dataset_retrievers(config, prop["dataset"]):
            raise ValueError(f"config: propensity.retriever {prop['retriever']!r} is not run on {prop['dataset']!r}")


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
    if not filling(schema()).is_valid(config):
        raise ValueError(explain_config(config, schema()))


def load(path: str | Path, files: bool = True) -> dict:
    """A config file as the workflow sees it (outside Snakemake: the compute plan's tools, tests):
    validated against the schema with its defaults filled, then :func:`prepare`-d."""
    import yaml

    check_duplicate_keys([path])
    config = yaml.safe_load(Path(path).read_text())
    validate(config)
    prepare(config, files)
    return config


def grid(config: dict) -> list[tuple[str, str]]:
    """Every (dataset, retriever) pair the config asks for."""
    return [(ds, r) for ds in config["datasets"] for r in dataset_retrievers(config, ds)]


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


if __name__ == "__main__":
    raise SystemExit(main())
