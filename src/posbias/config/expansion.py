"""The config expansions: a training recipe over several base models and seeds, and the trained models it registers
as ``models`` entries (with the check of a run's ``hyper`` block).
"""

from __future__ import annotations

from posbias import methods, paths
from posbias.config.experiments import (
    dataset_retrievers,
    is_pointwise,
    listwise_datasets,
    silver_retriever,
    silver_teacher,
    variant_of,
)
from posbias.rerankers import model_kinds, modes
from posbias.training import families


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
    with and without the penalty), and every pointwise variant trained so (``objectives``, OC-SFT among them: "12
    个基座上 τ-PSI 全部最低" ranks it among all), as ``{"base", "data", "ocsft", "single", "objectives"}``. A base
    is the ``models`` entry a variant's chain of ``base_model`` ends at. Variants are compared only where they
    continue from the same model on the same teacher's labels: a single-order run that made the grader OC-SFT
    continues from (another teacher, one step up the chain) is not OC-SFT's baseline. ``training`` after
    :func:`expand_seeds`."""
    training = config.get("training", {})

    def root(model: str) -> str:
        while model in training:
            model = training[model]["base_model"]
        return model

    roles: dict[tuple[str, str, str, str], dict] = {}
    for name, run in training.items():
        method = methods.get(run["method"])
        if not families.of(method.name).silver:
            continue
        start = variant_of(training, run["base_model"])
        key = (root(run["base_model"]), run["data"], start, silver_teacher(config, run))
        found = roles.setdefault(key, {"objectives": []})
        if variant_of(training, name) not in found["objectives"]:
            found["objectives"].append(variant_of(training, name))
        if method.on_lambda_grid:
            found.setdefault("ocsft" if method.consistency else "single", variant_of(training, name))
    return [{"base": base, "data": data, **found} for (base, data, _, _), found in roles.items()
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
    if base is None or not model_kinds.of(base).prompted:
        raise ValueError(f"{where}.base_model {run['base_model']!r} is not a models entry of kind "
                         f"{model_kinds.named('prompted')}")
    if base.get("adapters"):
        raise ValueError(f"{where}.base_model {run['base_model']!r} was saved as LoRA adapters alone "
                         f"(training.{run['base_model']}.hyper.lora.merge: false); set merge: true to train on from it")
    lora = run["hyper"].get("lora")
    adapters = bool(lora) and not lora.get("merge", True)  # hyper.lora.merge: false
    if adapters and base.get("engine") == "vllm":
        raise ValueError(f"{where}.hyper.lora.merge: false saves adapters alone, which the vLLM engine of "
                         f"{run['base_model']!r} does not load; set merge: true, or engine: transformers on the base")
    if method.family != modes.family(base):
        raise ValueError(f"{where}: method {run['method']!r} needs a base model of a {method.family} mode "
                         f"({', '.join(modes.names(method.family))}); {run['base_model']!r} is in mode {base['mode']!r}")
    if families.of(method.name).silver:
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
                              "kind": "causal_lm", "mode": base["mode"], "path": paths.model(name),
                              "trained": True, **({"adapters": True} if adapters else {})}


def _check_propensity(config: dict) -> None:
    prop = config.get("propensity", {})
    if prop.get("model"):
        if prop["model"] not in config["models"] or not model_kinds.of(config["models"][prop["model"]]).reranks:
            raise ValueError(f"config: propensity.model {prop['model']!r} is not a {model_kinds.named('reranks')} model")
        if prop.get("dataset") not in config["datasets"]:
            raise ValueError(f"config: propensity.dataset {prop.get('dataset')!r} is not a datasets entry")
        if prop["retriever"] not in dataset_retrievers(config, prop["dataset"]):
            raise ValueError(f"config: propensity.retriever {prop['retriever']!r} is not run on {prop['dataset']!r}")
