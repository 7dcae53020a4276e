"""The compute plan of a config: what a run costs, known before it runs (``snakemake plan``).

Per rule family (``rerank``, ``propensity_rerank``, ``silver_labels``, ``pool_design``, ``train``) and model: jobs, model
loads, windows, model calls, prompt tokens, and the device-hours they take on one device of the
throughput table (``config/throughput.yaml``, :func:`with_seconds` and :func:`summary`).

Calls and prompt tokens are counted, not modelled: the plan runs the reranking code itself
(:func:`posbias.rerank.rerank_order`, :func:`posbias.silver.silver_labels`, the propensity lists) with
every language model built tokenizer-only (``rerankers.build(..., loaded=(tokenizer, None))``): each
prompt is rendered and tokenised exactly as the job does it, and the forward pass is replaced by equal
scores. So the counts are exact wherever they do not depend on what the model answers:

- one window per list (depth ≤ window), pointwise Grades windows, propensity lists, CapCal's prompts
  and content-free priors, PermSC-window and BSC views: calls and tokens exact;
- simulated rerankers run for real (they are cheap): exact;
- sliding windows after the first hold passages the model promoted; the plan takes them as if the
  model returned its input order: calls exact, tokens estimated (``tokens_exact`` false);
- generation: the decoding steps depend on the answer; calls are their bound, ``max_new_tokens`` per
  window (``calls_exact`` false);
- a tokenizer not on disk (an HF id outside the local cache): tokens from the real tokenizer of its
  family where :mod:`posbias.standins` has one (Mistral's SentencePiece for Zephyr-family ids, Qwen's
  BPE for Qwen2/2.5/3 ids), else from :class:`RuleOfThumbTokenizer`; ``tokens_exact`` false either way
  (the stand-in is not the checkpoint's own file), and the ``tokenizer`` column says which;
- training: steps from the schedule, tokens from a sample of its instances (estimated).

After a run, :func:`compare` puts the plan beside the ``*.cost.parquet`` the jobs wrote. Without the
data (a dry environment), :mod:`posbias.dry_plan` plans on stand-ins.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import polars as pl
import yaml

from posbias import config as pbconfig
from posbias import debiasing, engines, methods, orders, pool, propensity, rerankers, schemas, silver
from posbias.data.collection import grades_by_query, passage_texts
from posbias.errors import PosbiasError
from posbias.models import resolve
from posbias.rerank import Experiment, present_candidates, rerank, rerank_order, window_of
from posbias.rerankers import Window, modes

FAMILIES = ("rerank", "propensity_rerank", "silver_labels", "pool_design", "train")
ORDER_SCHEMA = {"family": pl.String, "model": pl.String, "dataset": pl.String, "retriever": pl.String,
                "debias": pl.String, "order": pl.String, "job": pl.String, "queries": pl.Int64,
                "windows": pl.Int64, "calls": pl.Int64, "prompt_tokens": pl.Int64, "calls_exact": pl.Boolean,
                "tokens_exact": pl.Boolean, "tokenizer": pl.String}
RULE_OF_THUMB = "rule of thumb (RuleOfThumbTokenizer)"  # the tokenizer column where no real one is at hand
SIMULATED = "none (simulated)"
WORKFLOW = Path(__file__).resolve().parents[2]  # the checkout: config/throughput.yaml ships there
TRAIN_SAMPLE = 64  # training instances whose prompts are tokenised to estimate a training job's tokens


class RuleOfThumbTokenizer:
    """A stand-in tokenizer for a model whose own is not on disk: one token per punctuation mark and
    ``max(1, round(len / 4))`` per word or number (the published rule of thumb of about 4 characters
    per token of English text, OpenAI's "what are tokens"; about 1.2 tokens per English word here).
    It has the interface the prompt code uses (``__call__``, ``convert_ids_to_tokens``, no chat
    template), so an estimate comes from the same rendering as an exact count.
    """

    chat_template = None
    pad_token = eos_token = "</s>"
    _PIECE = re.compile(r"\w+|[^\w\s]")

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [1] if add_special_tokens else []  # a BOS token, as Llama/Mistral tokenizers add
        for chunk in text.split():  # no piece spans whitespace
            ids += self._chunk_ids(chunk)
        return {"input_ids": ids}

    @classmethod
    @functools.lru_cache(maxsize=1 << 17)
    def _chunk_ids(cls, chunk: str) -> tuple[int, ...]:
        """The ids of a whitespace-free chunk (memoised: a plan tokenises the same few thousand words
        millions of times)."""
        ids: list[int] = []
        for piece in cls._PIECE.findall(chunk):
            n = max(1, round(len(piece) / 4)) if piece[0].isalnum() or piece[0] == "_" else 1
            ids += [zlib.crc32(f"{piece}#{i}".encode()) for i in range(n)]
        return tuple(ids)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [str(i) for i in ids]


class MemoTokenizer:
    """A tokenizer whose plain calls, ``tokenizer(text, add_special_tokens=…)["input_ids"]`` (the only
    form the prompt code uses), are memoised by the text's digest; any other call and every attribute
    are the wrapped tokenizer's. A plan renders the same prompts for every model of a tokenizer family
    (a preset's trained variants and model sizes read the same windows), and tokenising them again was
    most of a preset's dry plan. One lives as long as one :func:`plan_orders`."""

    def __init__(self, tokenizer):
        object.__setattr__(self, "_tokenizer", tokenizer)
        object.__setattr__(self, "_memo", {})

    def __call__(self, text, add_special_tokens: bool = True, **kwargs):
        if kwargs or not isinstance(text, str):
            return self._tokenizer(text, add_special_tokens=add_special_tokens, **kwargs)
        key = (hashlib.blake2b(text.encode(), digest_size=16).digest(), add_special_tokens)
        ids = self._memo.get(key)
        if ids is None:  # kept as a compact int array: a preset has tens of thousands of ~2k-token prompts
            ids = array("l", self._tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
            self._memo[key] = ids
        return {"input_ids": ids.tolist()}

    def __getattr__(self, name: str):
        return getattr(self._tokenizer, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._tokenizer, name, value)


# what the stability and decisions stages alone read of the ocsft section (not the plan)
_STABILITY_ONLY = ("bsc_k", "presentations", "grid_points", "dev")


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
    return pbconfig.canonical(out)


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
    if spec["kind"] == "simulated":
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
    return str(root / path) if path.startswith("results/") else path


def inputs(config: dict) -> list[str]:
    """Every file the plan reads: the data and first-stage runs of each experiment, the propensity
    and silver-label datasets, the listwise training sets, and the tiny model builds whose
    tokenizers count the tokens."""
    files: list[str] = []

    def data(dataset: str, retriever: str | None = None) -> None:
        files.extend(f"results/data/{dataset}/{name}.parquet" for name in ("queries", "corpus", "qrels"))
        if retriever:
            files.append(f"results/runs/{dataset}/{retriever}.parquet")

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
        if methods.get(run["method"]).pointwise:
            data(run["data"], pbconfig.silver_retriever(config, run["data"]))
            teacher = pbconfig.silver_teacher(config, run)
            if teacher != silver.QRELS_TEACHER:
                models.add(teacher)
        else:
            files.append(f"results/data/{run['data']}/listwise.parquet")
    for m in sorted(models):
        source = tokenizer_source(config, m)
        if config["models"][source].get("kind") == "causal_lm":
            path = resolve(source, config["models"])
            if path.startswith("results/models/"):
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


def plan_rerank(config: dict, root: Path, scale=_unit, tokenizers: dict | None = None) -> list[dict]:
    """One row per rerank job order: the windows, calls and prompt tokens it will spend."""
    data, out, built = _Data(root), [], {}
    for (m, d, r, debias, part), names in pbconfig.rerank_batches(config).items():
        settings = pbconfig.rerank_settings(config, m, d, r, debias, part)
        exp = data.experiment(d, r)
        if (m, d) not in built:
            built[(m, d)] = counting_reranker(config, m, exp.grades, settings.get("word_budget"), root, tokenizers)
        counting = built[(m, d)]
        base = counting.reranker
        for name in names:
            shown, _, _, cost = rerank_order(base, name, debias, settings, config["seed"], exp,
                                             config["models"][m]["batch_size"])
            # a window after the first holds what the model promoted: its tokens are exact only if the
            # model reads none (simulated) or every list fits one window
            one_window = base.pointwise or all(len(c.doc_ids) <= window_of(base, settings)
                                               for c in shown.lists)
            reads_tokens = config["models"][m]["kind"] == "causal_lm"
            out.append(_row("rerank", m, d, r, debias, name, f"{d}/{r}/{debias}.{part}", len(shown.lists), cost,
                            not base.decodes, counting, scale(d, settings["queries"]),
                            one_window or not reads_tokens))
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
    """The silver_labels jobs with a model teacher: view 0 and T shuffles of each training query."""
    out, seen, data = [], set(), _Data(root)
    oc = config["ocsft"]
    for run in config.get("training", {}).values():
        if not methods.get(run["method"]).pointwise:
            continue
        teacher, shuffles = pbconfig.silver_teacher(config, run), pbconfig.silver_shuffles(config, run)
        if teacher == silver.QRELS_TEACHER or (run["data"], teacher, shuffles) in seen:
            continue
        seen.add((run["data"], teacher, shuffles))
        exp = data.experiment(run["data"], pbconfig.silver_retriever(config, run["data"]))
        counting = counting_reranker(config, teacher, exp.grades, config["reranking"]["word_budget"], root,
                                     tokenizers)
        _, cost = silver.silver_labels(counting.reranker, exp.first_stage, exp.queries, exp.corpus, exp.grades, config["seed"],
                                       oc["depth"], pbconfig.silver_window(config, run["data"]), shuffles, oc.get("queries"),
                                       config["models"][teacher]["batch_size"])
        out.append(_row("silver_labels", teacher, run["data"], pbconfig.silver_retriever(config, run["data"]), "none",
                        f"t{shuffles}",
                        f"{run['data']}/t{shuffles}", cost["query_id"].n_unique(), cost, True, counting,
                        scale(run["data"], oc.get("queries"))))
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
        if methods.get(run["method"]).pointwise:
            exp = data.experiment(run["data"], pbconfig.silver_retriever(config, run["data"]))
            lists = present_candidates(exp.first_stage, exp.queries, exp.corpus, exp.grades, orders.parse("original"),
                                       0, config["ocsft"]["depth"], None, None, config["ocsft"].get("queries")).lists
            b = pbconfig.silver_window(config, run["data"])
            n_instances = scale(run["data"], config["ocsft"].get("queries")) * sum(
                math.ceil(min(len(c.doc_ids), config["ocsft"]["depth"]) / b) for c in lists)
            sample = [Window(c.query_id, c.query, c.doc_ids[:b], [c.texts[d] for d in c.doc_ids[:b]])
                      for c in lists[:TRAIN_SAMPLE]]
            grades = exp.grades
        else:
            listwise = schemas.read(root / "results" / "data" / run["data"] / "listwise.parquet", "listwise")
            views = config["augmentation"]["n_groups"] if run["aug"] == "posaug" else 1
            n_instances = scale(run["data"]) * listwise.height * views
            sample = [Window(q, text, docs, texts) for q, text, docs, texts in
                      listwise.head(TRAIN_SAMPLE).select("query_id", "query", "doc_ids", "texts").iter_rows()]
            grades = {}
        steps = hyper["max_steps"] if hyper["max_steps"] > 0 else math.ceil(hyper["epochs"] * n_instances / per_step)
        lists = steps * per_step
        counting = counting_reranker(config, run["base_model"], grades, config["reranking"]["word_budget"], root,
                                     tokenizers)
        tokens = [r.stats["prompt_tokens"] for r in counting.reranker.rank(sample)] if sample else [0]
        out.append({"family": "train", "model": name, "dataset": run["data"], "retriever": "", "debias": "",
                    "order": "", "job": name, "queries": round(n_instances), "windows": lists, "calls": lists,
                    "prompt_tokens": round(lists * sum(tokens) / len(tokens)), "calls_exact": False,
                    "tokens_exact": False, "tokenizer": counting.tokenizer})
    return out


def plan_orders(config: dict, root: Path = Path("."), scale=_unit) -> pl.DataFrame:
    """Every planned job order of the config (schema ``ORDER_SCHEMA``), from the data and first-stage
    runs under ``root``; ``scale(dataset, cap)`` is the number of real queries each list stands for
    (1, except for :class:`posbias.dry_plan.StandIns`)."""
    tokenizers: dict = {}  # each tokenizer loaded once and memoised for the whole plan (counting_reranker)
    rows = [row for part in (plan_rerank, plan_propensity, plan_silver, plan_pool, plan_train)
            for row in part(config, root, scale, tokenizers)]
    return pl.DataFrame(rows, schema=ORDER_SCHEMA)


# ---------------------------------------------------------------------------------------------------
# Time: the throughput table


DEFAULT_ENGINE = pbconfig.model_defaults("causal_lm")["engine"]  # a row without `engine`, training, Grades


@dataclass(frozen=True)
class Throughput:
    """One row of the throughput table: a model size on a device."""

    params_b: float
    prefill_tokens_per_s: float
    call_s: float
    decode_s: float  # seconds per decoding step of one window (generation rerankers)
    load_s: float
    source: str
    engine: str = DEFAULT_ENGINE  # the inference engine the row was measured or derived for (posbias.engines)


# The throughput table's numbers: the key, and whether 0 is allowed (a size or a rate must be positive).
_RATES = {"params_b": False, "prefill_tokens_per_s": False, "call_s": True, "decode_s": True, "load_s": True}


def _rate(path, where: str, value, zero: bool) -> float:
    """A number of the throughput table, checked: finite, and positive (or non-negative where ``zero``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        need = "a number ≥ 0" if zero else "a number > 0"
        raise PosbiasError(f"{path}: {where} is {value!r}, not {need}{pbconfig.exponent_hint(value)}; fix the row "
                           "(device-hours would be wrong or negative)")
    return float(value)


def read_throughput(path: str | Path, device: str) -> tuple[list[Throughput], dict]:
    """(rows of ``device``, the table's other settings: ``simulated`` and ``train_factor``), every number
    checked; PosbiasError naming the file, the row and the key otherwise."""
    if not Path(path).is_file():
        raise PosbiasError(f"plan.throughput: {path} is not a file; point plan.throughput at the throughput table "
                           "(config/throughput.yaml ships with the workflow)")
    try:
        table = yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as exc:
        raise PosbiasError(pbconfig.yaml_syntax(path, exc)) from None
    devices = table.get("devices") if isinstance(table, dict) else None
    if not isinstance(devices, dict) or device not in devices:
        raise PosbiasError(f"{path}: plan.device {device!r} has no entry under `devices` "
                           f"({', '.join(devices or {})}); add its rows or pick one of them")
    rows = devices[device].get("rows") if isinstance(devices[device], dict) else None
    if not isinstance(rows, list) or not rows:
        raise PosbiasError(f"{path}: devices.{device}.rows must be a list of rows ({', '.join(_RATES)}, source)")
    parsed = []
    for i, row in enumerate(rows):
        where = f"devices.{device}.rows[{i}]"
        if not isinstance(row, dict) or not {*_RATES, "source"} <= set(row) <= {*_RATES, "source", "engine"}:
            have = sorted(row) if isinstance(row, dict) else row
            raise PosbiasError(f"{path}: {where} needs exactly the keys {', '.join(_RATES)}, source and optionally "
                               f"engine (has {have})")
        engine = row.get("engine", DEFAULT_ENGINE)
        if engine not in engines.ENGINES:
            raise PosbiasError(f"{path}: {where}.engine is {engine!r}; use one of {', '.join(engines.ENGINES)}")
        parsed.append(Throughput(**{k: _rate(path, f"{where}.{k}", row[k], zero) for k, zero in _RATES.items()},
                                 source=str(row["source"]), engine=engine))
    simulated = table.get("simulated")
    if not isinstance(simulated, dict):
        raise PosbiasError(f"{path}: `simulated` needs call_s (seconds per simulated window) and source")
    simulated = {**simulated, "call_s": _rate(path, "simulated.call_s", simulated.get("call_s"), True)}
    return parsed, {"simulated": simulated, "train_factor": _rate(path, "train_factor", table.get("train_factor"), False)}


def check_throughput(config: dict) -> None:
    """The throughput table of ``plan.throughput`` on ``plan.device``, read at parse time: a bad table is
    refused before any job, so a failed plan job never removes the last good plan."""
    read_throughput(throughput_path(config), config["plan"]["device"])


def throughput_for(rows: list[Throughput], params_b: float, engine: str = DEFAULT_ENGINE) -> Throughput:
    """The row of ``engine`` nearest in size (log scale), its tokens per second scaled by row size / model
    size (prefill is compute-bound: FLOPs per token grow with the parameters); call and load seconds as
    the row's."""
    mine = [r for r in rows if r.engine == engine]
    if not mine:
        raise PosbiasError(f"plan.throughput: the table has no {engine} rows for plan.device; add them (engine: "
                           f"{engine}) or plan with engine transformers")
    row = min(mine, key=lambda r: abs(math.log(r.params_b / params_b)))
    return Throughput(params_b, row.prefill_tokens_per_s * row.params_b / params_b, row.call_s, row.decode_s,
                      row.load_s, row.source if math.isclose(row.params_b, params_b, rel_tol=0.01)
                      else f"{row.source}, scaled from {row.params_b:g}B", engine)


def engine_of(config: dict, model: str, family: str, engine: str | None = None) -> str:
    """The engine whose throughput a ``family`` job of ``model`` runs at: the model's ``engine`` (or, given,
    ``engine`` wherever that engine serves the model's mode); training always on transformers."""
    spec = config["models"][model]
    if family == "train":
        return DEFAULT_ENGINE
    configured = spec.get("engine", DEFAULT_ENGINE)
    return engine if engine and spec.get("mode") in engines.ENGINES[engine].modes else configured


def model_params_b(config: dict, model: str, root: Path) -> float | None:
    """Parameters (billions) of a causal LM: counted from its ``config.json`` where it is on disk (no
    weights loaded), else the entry's ``params_b``; None for a simulated model."""
    spec = config["models"][model]
    if spec["kind"] == "simulated":
        return None
    if spec.get("params_b"):
        return spec["params_b"]
    path = Path(_model_path(config, tokenizer_source(config, model), root))
    if (path / "config.json").is_file():
        return parameters_b(path)
    raise PosbiasError(f"config: models.{model}.params_b is needed for the compute plan's time estimate "
                       f"({path} has no config.json here); set it to the model's size in billions")


def parameters_b(path: str | Path) -> float:
    """Parameters (billions) of the causal LM folder at ``path``, from its config.json (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in net.parameters()) / 1e9


def throughput_path(config: dict) -> Path:
    """``plan.throughput``: relative to the working directory where it exists there (your copy), else to
    the workflow (the table that ships with it)."""
    path = Path(config["plan"]["throughput"])
    return path if path.is_absolute() or path.exists() else WORKFLOW / path


def with_seconds(orders_: pl.DataFrame, config: dict, root: Path = Path("."),
                 throughput: Path | None = None, engine: str | None = None) -> pl.DataFrame:
    """``orders_`` with each row's throughput row and estimated model seconds: ``calls · call_s + tokens /
    tokens_per_s`` (generation: ``decode_s`` per call, a decoding step; training: ``tokens · train_factor /
    tokens_per_s``), on ``plan.device`` of the table at ``throughput`` (default :func:`throughput_path`),
    at the rows of each model's engine (``engine``: that engine wherever it serves the model, as if the
    config said so; :func:`engine_of`); ``root`` holds the tiny model builds whose size is counted."""
    plan = config["plan"]
    rows, other = read_throughput(throughput or throughput_path(config), plan["device"])
    call_s = other["simulated"]["call_s"]  # a simulated model's call costs the same in every mode
    simulated = Throughput(0.0, math.inf, call_s, call_s, 0.0, other["simulated"]["source"])
    sizes = {model: model_params_b(config, model, root) for model in orders_["model"].unique(maintain_order=True)}
    chosen = {}
    for family, model in orders_.select("family", "model").unique(maintain_order=True).iter_rows():
        params = sizes[model]
        chosen[family, model] = (simulated if params is None else
                                 throughput_for(rows, params, engine_of(config, model, family, engine)))
    seconds, loads, sources, params = [], [], [], []
    for family, model, calls, tokens in orders_.select("family", "model", "calls", "prompt_tokens").iter_rows():
        row = chosen[family, model]
        if family == "train":
            seconds.append(tokens * other["train_factor"] / row.prefill_tokens_per_s)
        else:  # the calls of a mode that decodes are decoding steps
            per_call = row.decode_s if modes.get(config["models"][model]["mode"]).decodes else row.call_s
            seconds.append(calls * per_call + tokens / row.prefill_tokens_per_s)
        loads.append(row.load_s)
        sources.append(row.source)
        params.append(row.params_b or None)
    return orders_.with_columns(model_seconds=pl.Series(seconds, dtype=pl.Float64),
                                load_s=pl.Series(loads, dtype=pl.Float64), params_b=pl.Series(params, dtype=pl.Float64),
                                throughput=pl.Series(sources, dtype=pl.String))


def summary(orders_: pl.DataFrame, config: dict) -> pl.DataFrame:
    """Per (family, model): jobs (= model loads: every job loads its model once), windows, calls, prompt
    tokens, whether both counts are exact, and device-hours: the model seconds plus ``load_s`` per job
    and GPU (a training job's GPUs share its tokens and each loads the model)."""
    out = []
    for (family, model), part in orders_.group_by("family", "model", maintain_order=True):
        jobs = part["job"].n_unique()
        gpus = max(config["training"][model].get("gpus", 0), 1) if family == "train" else 1
        # a training job's tokens are shared by its GPUs (data parallel); each GPU loads the model
        device_seconds = jobs * gpus * part["load_s"][0] + part["model_seconds"].sum()
        out.append({"family": family, "model": model, "params_b": part["params_b"][0], "jobs": jobs,
                    "model_loads": jobs, "windows": int(part["windows"].sum()), "calls": int(part["calls"].sum()),
                    "prompt_tokens": int(part["prompt_tokens"].sum()), "calls_exact": bool(part["calls_exact"].all()),
                    "tokens_exact": bool(part["tokens_exact"].all()), "device_hours": device_seconds / 3600,
                    "throughput": part["throughput"][0], "tokenizer": part["tokenizer"][0]})
    return pl.DataFrame(out, schema={"family": pl.String, "model": pl.String, "params_b": pl.Float64,
                                     "jobs": pl.Int64, "model_loads": pl.Int64, "windows": pl.Int64,
                                     "calls": pl.Int64, "prompt_tokens": pl.Int64, "calls_exact": pl.Boolean,
                                     "tokens_exact": pl.Boolean, "device_hours": pl.Float64,
                                     "throughput": pl.String, "tokenizer": pl.String})


def tokenizers(summary_: pl.DataFrame) -> str:
    """Which tokenizer counted each model's tokens, in words: "tokenizer (model, model); …"."""
    by = summary_.group_by("tokenizer", maintain_order=True).agg(pl.col("model").unique(maintain_order=True))
    return "; ".join(f"{t} ({', '.join(models)})" for t, models in by.iter_rows())


def _hours(value: float) -> str:
    return f"{value:,.2f}" if value >= 0.01 else f"{value:.2g}"


def _count(value: int, exact: bool) -> str:
    return f"{value:,}" if exact else f"~{value:,}"


def table(summary_: pl.DataFrame, device: str):
    """The plan as a :class:`posbias.paper.writers.Table`: a row per family and model, then the totals
    per family and overall; a ``~`` marks an estimated count."""
    from posbias.paper.writers import Table

    def cells(family, model, part):
        return {"family": family, "model": model, "jobs": f"{part['jobs'].sum():,}",
                "model loads": f"{part['model_loads'].sum():,}", "windows": f"{part['windows'].sum():,}",
                "model calls": _count(int(part["calls"].sum()), bool(part["calls_exact"].all())),
                "prompt tokens": _count(int(part["prompt_tokens"].sum()), bool(part["tokens_exact"].all())),
                f"{device} hours": _hours(part["device_hours"].sum())}

    rows = [cells(f, m, summary_.filter((pl.col("family") == f) & (pl.col("model") == m)))
            for f, m in summary_.select("family", "model").iter_rows()]
    rows += [cells(f, "all", summary_.filter(pl.col("family") == f))
             for f in FAMILIES if f in set(summary_["family"])]
    rows.append(cells("all", "all", summary_))
    notes = (f"Device-hours on {device} from the throughput table: model loads + calls · seconds per call + prompt "
             "tokens / tokens per second (training: tokens × train_factor, shared by its GPUs, each loading the "
             "model). A ~ marks an estimate: "
             "sliding windows after the first (their passages depend on the model's answers), generation "
             "(decoding steps bounded by max_new_tokens), a tokenizer not on disk (counted with the real tokenizer "
             "of its family, posbias.standins, or the rule of thumb of RuleOfThumbTokenizer), training (steps × "
             "lists per step × sampled tokens per list). Tokens counted with: " + tokenizers(summary_)
             + ". Throughput rows: " + "; ".join(summary_["throughput"].unique(maintain_order=True)) + ".")
    return Table(summary_, pl.DataFrame(rows), notes)


def compare(planned: pl.DataFrame, actual: pl.DataFrame) -> pl.DataFrame:
    """Planned beside actual, per job order: ``actual`` has the plan's keys (family, model, dataset,
    retriever, debias, order) and the summed windows, calls, prompt_tokens and seconds of the
    ``*.cost.parquet`` the jobs wrote (:func:`actual`). ``calls_match``: equal where the plan is exact,
    actual ≤ planned where it is a bound (generation); ``tokens_match``: equal, null where the plan
    estimates; ``seconds_ratio``: actual / planned model seconds."""
    keys = ["family", "model", "dataset", "retriever", "debias", "order"]
    joined = planned.join(actual, on=keys, how="inner", suffix="_actual")
    return joined.with_columns(
        calls_match=pl.when(pl.col("calls_exact")).then(pl.col("calls") == pl.col("calls_actual"))
        .otherwise(pl.col("calls_actual") <= pl.col("calls")),
        tokens_match=pl.when(pl.col("tokens_exact")).then(pl.col("prompt_tokens") == pl.col("prompt_tokens_actual")),
        seconds_ratio=pl.col("seconds") / pl.col("model_seconds"),
    ).select(*keys, "calls", "calls_actual", "calls_exact", "calls_match", "prompt_tokens", "prompt_tokens_actual",
             "tokens_exact", "tokens_match", "model_seconds", "seconds", "seconds_ratio", "throughput")


def cost_files(config: dict) -> list[tuple[dict, str]]:
    """(plan keys, path) of every cost file a run writes for a planned job order: each window-level
    rerank order, the propensity reranking, the silver labels of a model teacher and each pool design."""
    out = []
    for m, d, r, order, debias in pbconfig.rerank_grid(config):
        if debiasing.parse(debias).level == "window":
            out.append(({"family": "rerank", "model": m, "dataset": d, "retriever": r, "debias": debias,
                         "order": order}, f"results/rerank/{m}/{d}/{r}/{order}/{debias}.cost.parquet"))
    prop = config.get("propensity", {})
    if prop.get("model"):
        out.append(({"family": "propensity_rerank", "model": prop["model"], "dataset": prop["dataset"],
                     "retriever": prop["retriever"], "debias": "none", "order": "propensity"},
                    f"results/propensity/{prop['model']}/reranked.cost.parquet"))
    for run in config.get("training", {}).values():
        teacher = pbconfig.silver_teacher(config, run) if methods.get(run["method"]).pointwise else silver.QRELS_TEACHER
        if teacher != silver.QRELS_TEACHER:
            out.append(({"family": "silver_labels", "model": teacher, "dataset": run["data"],
                         "retriever": pbconfig.silver_retriever(config, run["data"]), "debias": "none",
                         "order": f"t{pbconfig.silver_shuffles(config, run)}"},
                        pbconfig.silver_path(config, run).removesuffix(".parquet") + ".cost.parquet"))
    for m, d, r in pbconfig.pool_targets(config):
        out.append(({"family": "pool_design", "model": m, "dataset": d, "retriever": r, "debias": "none",
                     "order": "pool"}, f"results/metrics/pool/{m}/{d}/{r}.cost.parquet"))
    return list({path: (keys, path) for keys, path in out}.values())


def actual(files: list[tuple[dict, str]]) -> pl.DataFrame:
    """The summed windows, calls, prompt tokens and seconds of each cost file, with its plan keys."""
    rows = []
    for keys, path in files:
        cost = schemas.read(path, "cost")
        rows.append(keys | {"windows": int(cost["windows"].sum()), "calls": int(cost["calls"].sum()),
                            "prompt_tokens": int(cost["prompt_tokens"].sum()), "seconds": float(cost["seconds"].sum())})
    return pl.DataFrame(rows, schema={**{k: pl.String for k in ("family", "model", "dataset", "retriever", "debias",
                                                                "order")},
                                      "windows": pl.Int64, "calls": pl.Int64, "prompt_tokens": pl.Int64,
                                      "seconds": pl.Float64})


def check_table(checked: pl.DataFrame):
    """:func:`compare`'s rows summed per family and model, as a :class:`posbias.paper.writers.Table`:
    planned and actual calls and tokens, how many job orders match, and actual / planned model seconds."""
    from posbias.paper.writers import Table, fmt

    grouped = checked.group_by("family", "model", maintain_order=True).agg(
        orders=pl.len(), calls=pl.col("calls").sum(), calls_actual=pl.col("calls_actual").sum(),
        calls_exact=pl.col("calls_exact").all(), calls_match=pl.col("calls_match").sum(),
        prompt_tokens=pl.col("prompt_tokens").sum(), prompt_tokens_actual=pl.col("prompt_tokens_actual").sum(),
        tokens_exact=pl.col("tokens_exact").all(), tokens_match=pl.col("tokens_match").sum(),
        model_seconds=pl.col("model_seconds").sum(), seconds=pl.col("seconds").sum())
    view = grouped.select(
        "family", "model", pl.col("orders").alias("job orders"),
        pl.format("{} / {}", pl.col("calls"), pl.col("calls_actual")).alias("calls plan / run"),
        pl.format("{} of {}", pl.col("calls_match"), pl.col("orders")).alias("calls match"),
        pl.format("{} / {}", pl.col("prompt_tokens"), pl.col("prompt_tokens_actual")).alias("tokens plan / run"),
        pl.format("{} of {}", pl.col("tokens_match"), pl.col("orders")).alias("tokens match"),
        pl.struct("model_seconds", "seconds").map_elements(
            lambda r: f"{fmt(r['model_seconds'], 1)} / {fmt(r['seconds'], 1)}", return_dtype=pl.String)
        .alias("model s plan / run"),
    )
    exact = checked.filter(pl.col("calls_exact") & pl.col("tokens_exact"))
    ok = exact.filter(pl.col("calls_match") & pl.col("tokens_match")).height
    notes = (f"{ok} of {exact.height} job orders the plan counts exactly match the run in calls and tokens; "
             f"{checked.height - exact.height} are estimates or bounds (calls match: actual ≤ planned for "
             "generation; tokens match: counted only where exact). Model seconds exclude model loads; "
             "the run's are the reranking wall time of the jobs' cost files.")
    return Table(grouped, view, notes)
