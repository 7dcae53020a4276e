"""The plan's counts: every job order's windows, model calls and prompt tokens, from the reranking code itself run
with tokenizer-only models (see :mod:`posbias.plan`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import polars as pl

from posbias import config as pbconfig
from posbias import augment, methods, orders, paths, pool, propensity, rerankers, schemas, silver
from posbias.data.collection import grades_by_query, passage_texts
from posbias.errors import PosbiasError
from posbias.models import resolve
from posbias.plan.token_counters import RULE_OF_THUMB, MemoTokenizer, RuleOfThumbTokenizer
from posbias.rerank import Experiment, present_candidates, rerank, rerank_order, window_of
from posbias.rerankers import Window, model_kinds
from posbias.training import families
from posbias.training.spec import check_warmup

JOB_FAMILIES = ("rerank", "propensity_rerank", "silver_labels", "pool_design", "train")


ORDER_SCHEMA = {"family": pl.String, "model": pl.String, "dataset": pl.String, "retriever": pl.String,
                "debias": pl.String, "order": pl.String, "job": pl.String, "queries": pl.Int64,
                "windows": pl.Int64, "calls": pl.Int64, "prompt_tokens": pl.Int64, "calls_exact": pl.Boolean,
                "tokens_exact": pl.Boolean, "tokenizer": pl.String}


SIMULATED = "none (simulated)"


TRAIN_SAMPLE = 64  # training instances whose prompts are tokenised to estimate a training job's tokens


# what the stability and decisions stages alone read of the ocsft section (not the plan)
_STABILITY_ONLY = ("bsc_k", "presentations", "grid_points", "dev", "adaptive")


def settings(config: dict) -> dict:
    """What the plan reads of a validated config, and nothing else (the ``plan`` job's params, so an
    edit elsewhere does not replan): seed, datasets, retrievers, models, reranking, propensity,
    augmentation, ocsft without the stability-only keys, the consumers' windows, plan, and each
    training entry without its operational trainer settings (:func:`posbias.config.train_settings`)."""
    out = {k: config[k] for k in ("seed", "datasets", "retrievers", "models", "reranking", "augmentation", "plan")}
    out["consumers"] = {name: {"window": c["window"]} for name, c in config["consumers"].items()}
    out["propensity"] = config.get("propensity", {})
    out["ocsft"] = {k: v for k, v in config["ocsft"].items() if k not in _STABILITY_ONLY}
    out["training"] = {name: pbconfig.train_settings(config, name) for name in config.get("training", {})}
    return pbconfig.sorted_keys(out)


def tokenizer_source(config: dict, model: str) -> str:
    """The models entry whose tokenizer ``model`` uses: a trained model keeps its base model's."""
    while config["models"][model].get("trained"):
        model = config["training"][model]["base_model"]
    return model


class Counting(NamedTuple):
    """A reranker that counts, whether its token counts are exact, and which tokenizer counts them."""

    reranker: object
    exact: bool
    tokenizer: str


def counting_reranker(config: dict, model: str, grades: dict, word_budget: int | None, root: Path,
                      tokenizers: dict | None = None) -> Counting:
    """The counting reranker of ``model``: for a causal LM, a tokenizer-only reranker on its own
    tokenizer (exact), or, where that is not on disk, on the real tokenizer of its family
    (:func:`posbias.standins.for_model`) or else :class:`RuleOfThumbTokenizer` (both estimates); for a
    simulated model, the reranker itself. ``tokenizers`` (a plan's, by what the ``tokenizer`` column
    says) holds each tokenizer once, memoised (:class:`MemoTokenizer`), for every model that uses it."""
    from posbias import standins
    from posbias.rerankers.lm import LMSpec, load

    spec = config["models"][model]
    if not model_kinds.of(spec).weights:
        return Counting(rerankers.build(spec, None, grades, config["seed"], "cpu", word_budget), True, SIMULATED)
    path = _model_path(config, tokenizer_source(config, model), root)
    tokenizers = {} if tokenizers is None else tokenizers
    own = f"own ({path})"
    if own in tokenizers:
        tokenizer, exact, label = tokenizers[own], True, own
    else:
        try:
            tokenizer, _ = load(LMSpec(path, trust_remote_code=spec["trust_remote_code"]), with_model=False)
            exact, label = True, own
        except PosbiasError:
            name = standins.for_model(path)
            if name is None:
                tokenizer, exact, label = RuleOfThumbTokenizer(), False, RULE_OF_THUMB
            else:
                tokenizer = standins.tokenizer(name)
                exact, label = False, f"stand-in {name}: {standins.STANDINS[name].source}"
        tokenizer = tokenizers.setdefault(label, MemoTokenizer(tokenizer))
    built = rerankers.build(spec, path, grades, config["seed"], "cpu", word_budget, loaded=(tokenizer, None))
    return Counting(built, exact, label)


def _model_path(config: dict, model: str, root: Path) -> str:
    path = resolve(model, config["models"])
    return str(root / path) if path.startswith(paths.RESULTS + "/") else path


def inputs(config: dict) -> list[str]:
    """Every file the plan reads: the data and first-stage runs of each experiment, the propensity
    and silver-label datasets, the listwise training sets, and the tiny model builds whose
    tokenizers count the tokens."""
    files: list[str] = []

    def data(dataset: str, retriever: str | None = None) -> None:
        files.extend(paths.data(dataset, name) for name in ("queries", "corpus", "qrels"))
        if retriever:
            files.append(paths.run(dataset, retriever))

    models = set()
    for m, d, r, _, _ in pbconfig.rerank_grid(config):
        data(d, r)
        models.add(m)
    prop = config.get("propensity", {})
    if prop.get("model"):
        data(prop["dataset"], prop["retriever"])
        models.add(prop["model"])
    for name, run in config.get("training", {}).items():
        models.add(run["base_model"])
        if families.of(run["method"]).silver:
            data(run["data"], pbconfig.silver_retriever(config, run["data"]))
            teacher = pbconfig.silver_teacher(config, run)
            if teacher != silver.QRELS_TEACHER:
                models.add(teacher)
        else:
            files.append(paths.data(run["data"], "listwise"))
    for m in sorted(models):
        source = tokenizer_source(config, m)
        if model_kinds.of(config["models"][source]).prompted:
            try:
                path = resolve(source, config["models"])
            except PosbiasError as exc:
                raise PosbiasError(f"models.{source}.path: {exc}") from None
            if path.startswith(paths.MODELS):
                files.append(path)
    return list(dict.fromkeys(files))


class _Data:
    """The parquet files of the plan's datasets, each read once."""

    def __init__(self, root: Path):
        self.root, self._cache = root, {}

    def experiment(self, dataset: str, retriever: str) -> Experiment:
        key = (dataset, retriever)
        if key not in self._cache:
            base = self.root / "results" / "data" / dataset
            self._cache[key] = Experiment(
                dataset, schemas.read(self.root / "results" / "runs" / dataset / f"{retriever}.parquet", "run"),
                schemas.read(base / "queries.parquet", "queries"), schemas.read(base / "corpus.parquet", "corpus"),
                grades_by_query(schemas.read(base / "qrels.parquet", "qrels")))
        return self._cache[key]


def _row(family: str, model: str, dataset: str, retriever: str, debias: str, order: str, job: str, queries: int,
         cost: pl.DataFrame, calls_exact: bool, counting: Counting, scale: float = 1.0,
         tokens_exact: bool = True) -> dict:
    """A plan row; ``scale`` (stand-ins: real queries per stand-in query) multiplies the counts; the
    tokens are exact where ``tokens_exact`` (the order's own reason) and ``counting``'s tokenizer allow."""
    return {"family": family, "model": model, "dataset": dataset, "retriever": retriever, "debias": debias,
            "order": order, "job": job, "queries": round(queries * scale), "windows": round(cost["windows"].sum() * scale),
            "calls": round(cost["calls"].sum() * scale), "prompt_tokens": round(cost["prompt_tokens"].sum() * scale),
            "calls_exact": calls_exact and scale == 1, "tokens_exact": tokens_exact and counting.exact and scale == 1,
            "tokenizer": counting.tokenizer}


def _unit(dataset: str, cap: int | None = None) -> float:
    """The scale of a plan on the real data: each list stands for itself."""
    return 1.0


def _mean_row(rows: list[dict], order: str, job: str) -> dict:
    """A plan row for ``order`` of ``job`` with the mean counts of ``rows`` (orders of its kind counted in its
    experiment), an estimate."""
    counts = {k: round(sum(r[k] for r in rows) / len(rows)) for k in ("queries", "windows", "calls", "prompt_tokens")}
    return {**rows[0], **counts, "order": order, "job": job, "calls_exact": False, "tokens_exact": False}


# The order kinds whose orders rerank the same passages as one another, rearranged: on stand-ins (one query, a
# passage list of one length) any few of them cost what each of the others costs (see plan_rerank)
_ESTIMATED_KINDS = ("shuffled", "position")


def plan_rerank(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None,
                orders_counted: int | None = None) -> list[dict]:
    """One row per rerank job order: the windows, calls and prompt tokens it will spend. ``orders_counted``
    (the dry plan's stand-ins, where every shuffled or position order of an experiment reranks the same
    passages): the first that many shuffled orders and position orders of each experiment and debias method
    are counted, the others take their kind's mean."""
    data, out, built = _Data(root), [], {}
    counted: dict[tuple, list[dict]] = {}  # (experiment, debias method, order kind) → the rows counted
    for (m, d, r, debias, part), names in pbconfig.rerank_batches(config).items():
        settings = pbconfig.rerank_settings(config, m, d, r, debias, part)
        exp = data.experiment(d, r)
        if (m, d) not in built:
            built[(m, d)] = counting_reranker(config, m, exp.grades, settings.get("word_budget"), root, tokenizers)
        counting = built[(m, d)]
        base = counting.reranker
        job, rest = f"{d}/{r}/{debias}.{part}", []
        for name in names:
            kind = orders.parse(name).kind
            group = counted.setdefault((m, d, r, debias, kind), [])
            if orders_counted is not None and kind in _ESTIMATED_KINDS and len(group) >= orders_counted:
                rest.append((name, group))
                continue
            shown, _, _, cost = rerank_order(base, name, debias, settings, config["seed"], exp,
                                             config["models"][m]["batch_size"])
            # a window after the first holds what the model promoted: its tokens are exact only if the
            # model reads none (simulated) or every list fits one window
            one_window = base.pointwise or all(len(c.doc_ids) <= window_of(base, settings)
                                               for c in shown.lists)
            reads_tokens = model_kinds.of(config["models"][m]).prompted
            group.append(_row("rerank", m, d, r, debias, name, job, len(shown.lists), cost, not base.decodes,
                              counting, scale(d, settings["queries"]), one_window or not reads_tokens))
            out.append(group[-1])
        out += [_mean_row(group, name, job) for name, group in rest]
    return out


def plan_propensity(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None) -> list[dict]:
    """The propensity_rerank job: every sampled shuffle of every sampled query, one window each."""
    prop = config.get("propensity", {})
    if not prop.get("model"):
        return []
    exp = _Data(root).experiment(prop["dataset"], prop["retriever"])
    sampled = propensity.samples(exp.first_stage, prop["queries"], prop["k"], prop["shuffles"], config["seed"])
    lists = propensity.sample_lists(sampled, dict(exp.queries.select("query_id", "text").iter_rows()),
                                    passage_texts(exp.corpus))
    counting = counting_reranker(config, prop["model"], exp.grades, config["reranking"]["word_budget"], root,
                                 tokenizers)
    _, _, cost = rerank(counting.reranker, lists, window=prop["k"], step=prop["k"],
                        batch_size=config["models"][prop["model"]]["batch_size"])
    return [_row("propensity_rerank", prop["model"], prop["dataset"], prop["retriever"], "none", "propensity",
                 "propensity", sampled["query_id"].n_unique(), cost, not counting.reranker.decodes, counting,
                 scale(prop["dataset"], prop["queries"]))]


def plan_silver(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None) -> list[dict]:
    """The silver_labels jobs with a model teacher (:func:`posbias.config.silver_jobs`): view 0 and T shuffles of
    each training query."""
    out, data = [], _Data(root)
    oc = config["ocsft"]
    for dataset, teacher, shuffles in pbconfig.silver_jobs(config):
        if teacher == silver.QRELS_TEACHER:
            continue
        retriever = pbconfig.silver_retriever(config, dataset)
        exp = data.experiment(dataset, retriever)
        counting = counting_reranker(config, teacher, exp.grades, config["reranking"]["word_budget"], root,
                                     tokenizers)
        _, cost = silver.silver_labels(counting.reranker, exp.first_stage, exp.queries, exp.corpus, exp.grades, config["seed"],
                                       oc["depth"], pbconfig.silver_window(config, dataset), shuffles, oc.get("queries"),
                                       config["models"][teacher]["batch_size"])
        out.append(_row("silver_labels", teacher, dataset, retriever, "none", f"t{shuffles}", f"{dataset}/t{shuffles}",
                        cost["query_id"].n_unique(), cost, True, counting, scale(dataset, oc.get("queries"))))
    return out


def plan_pool(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None) -> list[dict]:
    """The pool_design jobs: each scorer's ``pools`` × ``orders`` windows per query of the pool design
    (:func:`posbias.pool.layout`, the job's own code), scored by the counting model."""
    out, data, settings = [], _Data(root), config["ocsft"]["pool"]
    for m, d, r in pbconfig.pool_targets(config):
        exp = data.experiment(d, r)
        lists, cells, _ = pool.layout(exp.first_stage, exp.queries, exp.corpus, exp.grades, settings,
                                      config["models"][m]["grade_window"], config["seed"])
        counting = counting_reranker(config, m, exp.grades, config["reranking"]["word_budget"], root, tokenizers)
        _, cost = pool.score(counting.reranker, lists, cells, config["models"][m]["batch_size"])
        out.append(_row("pool_design", m, d, r, "none", "pool", f"{d}/{r}", cost.height, cost, True, counting,
                        scale(d, settings.get("queries"))))
    return out


def plan_train(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None) -> list[dict]:
    """Each train job: optimiser steps × lists per step, and its prompt tokens from a sample of its
    instances (listwise: the training set's lists as First prompts; pointwise: the first window of
    training queries as Grades prompts). Estimates: ``calls`` counts training lists, not forward passes."""
    out, data = [], _Data(root)
    for name, run in config.get("training", {}).items():
        hyper = run["hyper"]
        per_step = hyper["batch_size"] * hyper["grad_accum"] * max(run.get("gpus", 0), 1)
        if families.of(run["method"]).silver:
            exp = data.experiment(run["data"], pbconfig.silver_retriever(config, run["data"]))
            lists = present_candidates(exp.first_stage, exp.queries, exp.corpus, exp.grades, orders.parse(orders.ORIGINAL),
                                       0, config["ocsft"]["depth"], None, None, config["ocsft"].get("queries")).lists
            b = pbconfig.silver_window(config, run["data"])
            per_list = scale(run["data"], config["ocsft"].get("queries"))
            n_instances = per_list * sum(math.ceil(min(len(c.doc_ids), config["ocsft"]["depth"]) / b) for c in lists)
            if run.get("max_queries"):  # a label budget: the windows of that many of the labelled queries
                n_instances *= min(1.0, run["max_queries"] / (per_list * len(lists)))
            sample = [Window(c.query_id, c.query, c.doc_ids[:b], [c.texts[d] for d in c.doc_ids[:b]])
                      for c in lists[:TRAIN_SAMPLE]]
            grades = exp.grades
        else:
            listwise = schemas.read(root / "results" / "data" / run["data"] / "listwise.parquet", "listwise")
            views = augment.AUGMENTATIONS[run["aug"]].count(config["augmentation"]["n_groups"])
            n_instances = scale(run["data"]) * listwise.height * views
            sample = [Window(q, text, docs, texts) for q, text, docs, texts in
                      listwise.head(TRAIN_SAMPLE).select("query_id", "query", "doc_ids", "texts").iter_rows()]
            grades = {}
        steps = hyper["max_steps"] if hyper["max_steps"] > 0 else math.ceil(hyper["epochs"] * n_instances / per_step)
        if methods.get(run["method"]).consistency:  # the λ keys are in the params of the methods that read them
            check_warmup(f"training.{name}.hyper.consistency_warmup", run["method"], hyper["consistency"],
                         hyper["consistency_warmup"], steps)
        lists = steps * per_step
        counting = counting_reranker(config, run["base_model"], grades, config["reranking"]["word_budget"], root,
                                     tokenizers)
        tokens = [r.stats["prompt_tokens"] for r in counting.reranker.rank(sample)] if sample else [0]
        out.append({"family": "train", "model": name, "dataset": run["data"], "retriever": "", "debias": "",
                    "order": "", "job": name, "queries": round(n_instances), "windows": lists, "calls": lists,
                    "prompt_tokens": round(lists * sum(tokens) / len(tokens)), "calls_exact": False,
                    "tokens_exact": False, "tokenizer": counting.tokenizer})
    return out


def plan_orders(config: dict, root: Path = Path("."), scale=_unit, orders_counted: int | None = None) -> pl.DataFrame:
    """Every planned job order of the config (schema ``ORDER_SCHEMA``), from the data and first-stage
    runs under ``root``; ``scale(dataset, cap)`` is the number of real queries each list stands for
    (1, except for :class:`posbias.dry_plan.StandIns`); ``orders_counted``: see :func:`plan_rerank`."""
    tokenizers: dict = {}  # each tokenizer loaded once and memoised for the whole plan (counting_reranker)
    rows = plan_rerank(config, root, scale, tokenizers, orders_counted)
    rows += [row for part in (plan_propensity, plan_silver, plan_pool, plan_train)
             for row in part(config, root, scale, tokenizers)]
    return pl.DataFrame(rows, schema=ORDER_SCHEMA)
