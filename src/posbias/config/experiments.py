"""The experiment grid of a validated config: datasets × retrievers, the reranking experiments and their orders,
the consumers and the silver-label stage, and the targets the report rules build.
"""

from __future__ import annotations

from posbias import consumers, debias, methods, orders, paths
from posbias.rerankers import modes

IMPORTED_PREFIX = "imported:"


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


def orders_of(config: dict, experiment: dict) -> list[str]:
    """The evaluation orders of one reranking experiment: its ``orders``, else the original order, the
    shuffles and the position orders (these only for passage reranking: the other consumers' decisions
    are measured over shuffles, and a response set has fewer candidates than positions)."""
    if "orders" in experiment:
        return list(experiment["orders"])
    rr = config["reranking"]
    positions = rr["positions"] if consumers.get(consumer_of(config, experiment["dataset"])).positions else 0
    return ([orders.ORIGINAL] + [orders.shuffled(s) for s in range(rr["shuffles"])]
            + [orders.position(p) for p in range(1, positions + 1)])


def experiment_key(experiment: dict) -> tuple[str, str, str]:
    return experiment["model"], experiment["dataset"], experiment["retriever"]


def orders_for(config: dict, experiment: dict, method: str) -> list[str]:
    """The orders a debiasing method runs on: original and shuffled, plus positions if in ``position_debias``;
    a list-level method (PermSC over K reranked shuffles) has one result, written as ``original``."""
    if debias.parse(method).level == "list":
        return [orders.ORIGINAL]
    with_positions = method in experiment.get("position_debias", ["none"])
    return [o for o in orders_of(config, experiment) if with_positions or not orders.is_kind(o, "position")]


def find_experiment(config: dict, model: str, dataset: str, retriever: str) -> dict:
    """The reranking experiment of (model, dataset, retriever)."""
    return next(e for e in config["reranking"]["experiments"] if experiment_key(e) == (model, dataset, retriever))


def consumer_of(config: dict, dataset: str) -> str:
    """The consumer that reads pointwise scores on ``dataset`` (:mod:`posbias.consumers`)."""
    return config["datasets"][dataset].get("consumer", consumers.PASSAGE_RERANKING)


def relevant_grade(config: dict, dataset: str) -> int:
    """The configured "relevant" grade of ``dataset``: its ``datasets.<name>.relevant_grade``, else
    ``reranking.relevant_grade``. A job reading binary qrels counts grade 1 as relevant instead
    (:func:`posbias.data.collection.relevance_threshold`)."""
    return config["datasets"][dataset].get("relevant_grade", config["reranking"]["relevant_grade"])


def needs_reader(config: dict, dataset: str) -> bool:
    """Whether ``dataset``'s consumer reads retention sets with a reader (and needs gold answers)."""
    return consumers.get(consumer_of(config, dataset)).reader


def consumer_window(config: dict, dataset: str) -> int | None:
    """The Grades window B of ``dataset``'s consumer (its ``consumers.<name>.window``), None for one without
    (passage reranking: B is the model's ``grade_window`` when scoring and ``ocsft.window`` when
    silver-labelling)."""
    return config["consumers"].get(consumer_of(config, dataset), {}).get("window")


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
        if debias.parse(b).level == "window":
            kind = "position" if orders.parse(order).kind == "position" else "list"
            grouped.setdefault((m, d, r, b, kind), []).append(order)
    return {(*key[:4], f"{key[4]}-{i // size}"): names[i:i + size]
            for key, names in grouped.items() for i in range(0, len(names), size)}


def batch_of_order(config: dict) -> dict[tuple[str, str, str, str, str], str]:
    """(model, dataset, retriever, debias, order) → the part of the rerank job that reranks it
    (:func:`rerank_batches` inverted)."""
    return {(*key[:4], order): key[4] for key, names in rerank_batches(config).items() for order in names}


def reranked_file(batches: dict[tuple[str, str, str, str, str], str], model: str, dataset: str, retriever: str,
                  order: str, debias: str, suffix: str) -> str:
    """Where one reranked order's file is read: in its rerank job's batch folder (``batches``:
    :func:`batch_of_order`), or, for a list-level method, the run it combines (:func:`posbias.paths.reranked`)."""
    part = batches.get((model, dataset, retriever, debias, order))
    if part is None:
        return paths.reranked(model, dataset, retriever, order, debias, suffix)
    return paths.in_batch(model, dataset, retriever, debias, part, order, suffix)


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


def silver_teacher(config: dict, run: dict) -> str:
    """The teacher of a pointwise run: its own ``teacher``, else ``ocsft.teacher``, else its base model."""
    return run.get("teacher") or config.get("ocsft", {}).get("teacher") or run["base_model"]


def silver_shuffles(config: dict, run: dict) -> int:
    """Teacher shuffles T a pointwise run needs (0: first-stage order only)."""
    return config["ocsft"]["shuffles"] if methods.get(run["method"]).shuffled_silver else 0


def silver_path(config: dict, run: dict) -> str:
    return paths.silver(run["data"], silver_teacher(config, run), silver_shuffles(config, run))


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
        if sum(orders.is_kind(o, "shuffled") for o in orders_of(config, e)) < 2:
            continue  # stability needs two presentations
        out += [(*experiment_key(e), d) for d in dict.fromkeys(e.get("debias", ["none"]))
                if debias.parse(d).level != "list"]
    return list(dict.fromkeys(out))


def served_widths(config: dict) -> list[dict]:
    """The pointwise scorers of the stability stage (debias none) that read one checkpoint at several window
    widths B on one dataset and first stage (the serving-width table's rows; empty where no checkpoint is
    served so): each with the checkpoint it reads (the models entry its ``path`` names, else itself; a seeded
    training entry's variant) and its B there (the dataset's consumer window, else the model's
    ``grade_window``)."""
    served = []
    for model, dataset, retriever, method in stability_targets(config):
        spec = config["models"][model]
        if method != "none" or not is_pointwise(config, model):
            continue
        checkpoint = spec["path"] if spec.get("path") in config["models"] else model
        served.append({"model": model, "dataset": dataset, "retriever": retriever,
                       "checkpoint": variant_of(config.get("training", {}), checkpoint),
                       "window": consumer_window(config, dataset) or spec["grade_window"]})
    widths: dict[tuple, set[int]] = {}
    for entry in served:
        widths.setdefault((entry["checkpoint"], entry["dataset"], entry["retriever"]), set()).add(entry["window"])
    return [e for e in served if len(widths[(e["checkpoint"], e["dataset"], e["retriever"])]) > 1]


def listwise_datasets(config: dict) -> list[str]:
    """Datasets that carry listwise training instances."""
    return [name for name, spec in config["datasets"].items()
            if spec["source"] == "listwise" or (spec["source"] in ("synthetic", "toy") and spec.get("split") == "train")]


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


def grid(config: dict) -> list[tuple[str, str]]:
    """Every (dataset, retriever) pair the config asks for."""
    return [(ds, r) for ds in config["datasets"] for r in dataset_retrievers(config, ds)]


def made_here(spec: dict) -> bool:
    """Whether the workflow makes a ``models:`` entry's folder at ``posbias.paths.model(name)``: a tiny build,
    a GGUF conversion (:mod:`posbias.gguf`) or a training run."""
    return bool(spec.get("build") or spec.get("gguf") or spec.get("trained"))
