"""Per-rule param slices of a validated config: exactly the keys each job reads, so an edit reruns only what
depends on it.
"""

from __future__ import annotations

from posbias import debias, methods, orders
from posbias.config.experiments import (
    consumer_window,
    find_experiment,
    is_pointwise,
    orders_for,
    relevant_grade,
    silver_shuffles,
    silver_teacher,
    stability_targets,
    variant_of,
)
from posbias.config.expansion import base_pairs
from posbias.config.schema_defaults import model_defaults
from posbias.rerankers import model_kinds
from posbias.training import families


def rerank_settings(config: dict, model: str, dataset: str, retriever: str, method: str, part: str) -> dict:
    """What one ``rerank`` job (a batch of orders, :func:`rerank_batches`) reads from the config, and
    nothing else: its experiment's depth and query limit, the window and step, the position protocol's
    keys for a batch of position orders, the word budget (the experiment's, else ``reranking.word_budget``) for a model that reads passage text, and its
    debiasing method's settings. A job's params are exactly this and its orders, so adding an experiment
    or editing a key the job does not read reruns none of it."""
    rr = config["reranking"]
    experiment = find_experiment(config, model, dataset, retriever)
    out = {"depth": experiment.get("depth", rr["depth"]), "queries": experiment.get("queries"),
           "window": rr["window"], "step": rr["step"], "debias": debias.options(rr, method)}
    if part.startswith(orders.prefix("position")):
        out |= {"relevant_grade": relevant_grade(config, dataset), "position_k": rr["position_k"]}
    if model_kinds.of(config["models"][model]).prompted:
        out["word_budget"] = experiment.get("word_budget", rr["word_budget"])
    if is_pointwise(config, model) and consumer_window(config, dataset):
        out["grade_window"] = consumer_window(config, dataset)
    return sorted_keys(out)


def sorted_keys(value):
    """``value`` with every mapping's keys sorted, recursively: Snakemake compares params by ``repr``,
    so a rule's params must not depend on the order keys were written in the config."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [sorted_keys(v) for v in value]
    return value


def position_settings(config: dict, model: str, dataset: str, retriever: str, debias: str) -> dict:
    """The position protocol's keys for a summary whose orders include position orders, else nothing."""
    rr = config["reranking"]
    experiment = find_experiment(config, model, dataset, retriever)
    if not any(orders.is_kind(o, "position") for o in orders_for(config, experiment, debias)):
        return {}
    return {"position_k": rr["position_k"], "relevant_grade": relevant_grade(config, dataset)}


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
    return sorted_keys(spec)


def train_settings(config: dict, name: str) -> dict:
    """What a ``train`` job's result depends on: its training entry without the operational trainer
    settings, the hyper-parameters its method does not read (:func:`posbias.methods.reads_hyper`) and the
    list of sibling seeds (adding a seed trains only the new one), and its
    GPUs as the processes it trains in: 0 (a CPU job) and 1 train in one process alike, so moving a
    job onto one GPU does not retrain it."""
    run = config["training"][name]
    hyper = {k: v for k, v in run["hyper"].items()
             if k not in TRAIN_OPERATIONAL and methods.reads_hyper(run["method"], k)}
    settings = {k: v for k, v in run.items() if k not in ("seeds", "hyper")} | {"hyper": hyper}
    return sorted_keys(settings | {"gpus": max(1, run["gpus"])})


def training_labels(config: dict) -> dict:
    """What the paper tables and figures read of the training entries: method, augmentation and, for
    seeded models, the entry they are a seed of and the seed."""
    return {name: {k: run[k] for k in ("method", "aug", "variant", "seed") if k in run}
            for name, run in config.get("training", {}).items()}


def pointwise_settings(config: dict) -> dict[str, dict]:
    """Per pointwise training entry (a variant, its seeds counted once): its method, λ (0 without the
    penalty), views N (1 for single-view methods) and whether it is on OC-SFT's λ grid
    (:attr:`posbias.methods.TrainingMethod.on_lambda_grid`), as the OC-SFT settings table reads them."""
    out = {}
    for name, run in config.get("training", {}).items():
        method = methods.get(run["method"])
        if families.of(method.name).silver:
            views = run["hyper"]["views"] if method.views == "anchor+permutations" else 1
            out[variant_of(config["training"], name)] = {
                "method": method.name, "lambda": run["hyper"]["consistency"] if method.consistency else 0.0,
                "views": views, "grid": method.on_lambda_grid}
    return out


def scored_pointwise_variants(config: dict) -> list[str]:
    """The trained pointwise variants (:func:`pointwise_settings`) whose decision stability some experiment measures
    outside OC-SFT's dev set: the OC-SFT settings table's columns (rule ocsft_settings_table, planned only where
    there is one)."""
    settings, dev = pointwise_settings(config), config["ocsft"]["dev"]
    scored = [variant_of(config["training"], model) for model, dataset, _, level in stability_targets(config)
              if level == "none" and dataset != dev]
    return [v for v in dict.fromkeys(scored) if v in settings]


def scored_base_pairs(config: dict) -> list[dict[str, str]]:
    """The pairs of :func:`base_pairs` whose OC-SFT and single-order variants are both scored on some dataset and
    first stage outside OC-SFT's dev set: the pooled-over-bases figure's cells (rule bases_pooled_table, planned
    only where there is one)."""
    dev, cells = config["ocsft"]["dev"], {}
    for model, dataset, retriever, level in stability_targets(config):
        if level == "none" and dataset != dev:
            cells.setdefault(variant_of(config["training"], model), set()).add((dataset, retriever))
    return [p for p in base_pairs(config) if cells.get(p["ocsft"], set()) & cells.get(p["single"], set())]


def teacher_study(config: dict) -> list[dict]:
    """OC-SFT's teachers compared (its Figures 9 and 11): the pointwise variants trained by one method from one
    base on one training set, grouped, where a group's variants learn from at least two different silver
    teachers. One ``{"variant", "method", "data", "base", "teacher"}`` per variant of such a group (seeds once):
    each teacher's label quality and silver-β (over ``ocsft.shuffles`` shuffles) against its student's."""
    training = config.get("training", {})
    students: dict[str, dict] = {}
    for name, run in training.items():
        if families.of(run["method"]).silver:
            variant = variant_of(training, name)
            students[variant] = {"variant": variant, "method": run["method"], "data": run["data"],
                                 "base": variant_of(training, run["base_model"]),
                                 "teacher": silver_teacher(config, run)}
    groups: dict[tuple, list[dict]] = {}
    for student in students.values():
        groups.setdefault((student["data"], student["method"], student["base"]), []).append(student)
    return [s for group in groups.values() if len({s["teacher"] for s in group}) >= 2 for s in group]


def label_budget(config: dict) -> list[dict]:
    """OC-SFT's label-budget curve (its Figure 7: OC-SFT on few labels against order-averaged distillation on
    all): per pointwise run on the labels of only its first ``max_queries`` queries, that run, the runs of the
    same recipe (method and hyper-parameters) on every labelled query, and the order-averaged runs (targets
    averaged over the teacher's shuffles) from the same base on the same training set and teacher. One
    ``{"variant", "method", "data", "base", "teacher", "shuffles", "max_queries"}`` per variant (seeds once;
    ``max_queries`` None: every labelled query; ``shuffles``: the T teacher shuffles its labels took, 0 for
    one pass), in config order."""
    training = config.get("training", {})
    runs = {}
    for name, run in training.items():
        if families.of(run["method"]).silver:
            runs.setdefault(variant_of(training, name), run)

    def entry(variant: str, run: dict) -> dict:
        return {"variant": variant, "method": run["method"], "data": run["data"],
                "base": variant_of(training, run["base_model"]), "teacher": silver_teacher(config, run),
                "shuffles": silver_shuffles(config, run), "max_queries": run.get("max_queries")}

    chosen: dict[str, dict] = {}
    for budgeted, run in runs.items():
        if not run.get("max_queries"):
            continue
        key = entry(budgeted, run)
        for variant, other in runs.items():
            same = entry(variant, other)
            if (same["data"], same["base"], same["teacher"]) != (key["data"], key["base"], key["teacher"]):
                continue
            recipe = other["method"] == run["method"] and other["hyper"] == run["hyper"]
            if variant == budgeted or (recipe and not other.get("max_queries")) \
                    or methods.get(other["method"]).averaged_targets:
                chosen.setdefault(variant, same)
    return [chosen[v] for v in runs if v in chosen]


def silver_jobs(config: dict) -> list[tuple[str, str, int]]:
    """Every silver-label job the workflow runs, as (training set, teacher, shuffles T): each pointwise training
    entry's labels, and the labels over ``ocsft.shuffles`` shuffles whose silver-β the teacher study reads."""
    training = config.get("training", {})
    jobs = [(run["data"], silver_teacher(config, run), silver_shuffles(config, run)) for run in training.values()
            if families.of(run["method"]).silver]
    jobs += [(s["data"], s["teacher"], config["ocsft"]["shuffles"]) for s in teacher_study(config)]
    return list(dict.fromkeys(jobs))
