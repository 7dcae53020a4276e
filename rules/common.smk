# Helpers shared by all the .smk files: config validation, the experiment grid, input functions.
# Each function here is @one_line (posbias.errors): an input mistake it meets while Snakemake builds the
# DAG is one `posbias:` line on the console, not an InputFunctionException's frames.
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from posbias import config as pbconfig
from posbias import augment, consumers, debias, gguf, methods, orders, paper, paths, reproduction, schemas
from posbias.rerankers import model_kinds, modes
from posbias.retrieval import kinds
from posbias.training import families
from posbias import plan as pbplan
from posbias.data import local as pblocal
from posbias.errors import PosbiasError, one_line
from posbias.models import resolve as resolve_model
from posbias.provenance import ReportLine
from posbias.reproduction import claims

try:
    pbconfig.check_duplicate_keys(workflow.configfiles)
except ValueError as exc:
    raise WorkflowError(str(exc)) from None
try:
    pbconfig.validate(config)  # config/schema.yaml, its defaults filled
    for skipped in pbconfig.prepare(config):
        print(f"posbias: dataset {skipped!r} is optional and its files are missing; skipped", file=sys.stderr)
    for notice in pbconfig.notices(config):
        print(f"posbias: notice: {notice}", file=sys.stderr)
    pbplan.check_throughput(config)  # before any job: a failed plan job would remove the last good plan
except (ValueError, PosbiasError) as exc:
    raise WorkflowError(str(exc)) from None

try:  # the files each GGUF model is converted from (the package's file, or the parts its assemble() joins)
    GGUF_FILES = {m: [str(p) for p in gguf.parts(s["gguf"], m)] for m, s in config["models"].items() if "gguf" in s}
except PosbiasError as exc:
    raise WorkflowError(str(exc)) from None


@one_line
def gguf_source_version(spec):
    """The installed version of a GGUF source's package (a new release reconverts; a reinstall does not)."""
    return gguf.package_version(spec["package"]) if "package" in spec else None


GRID = pbconfig.grid(config)
REPORT_LINE = ReportLine()  # the provenance line under each table and figure of `snakemake --report`
SUMMARIES = pbconfig.summaries(config)
DEBIAS_PATTERN = debias.PATTERN
WINDOW_DEBIAS_PATTERN = debias.pattern("window")
LIST_DEBIAS_PATTERN = debias.pattern("list")
EXPERIMENTS = {pbconfig.experiment_key(e): e for e in config["reranking"]["experiments"]}
DATASETS = list(config["datasets"])


@one_line
def retrievers_of(indexed=None):
    """The grid's configured retrievers (not imported runs), only those whose kind builds an index
    (``indexed=True``) if asked."""
    names = {r for _, r in GRID if config["retrievers"].get(r, {}).get("kind") in kinds.names(indexed)}
    return sorted(names) or ["__none__"]


@one_line
def kind_of(wildcards):
    """The registry entry (posbias.retrieval.kinds) of the job's retriever."""
    return kinds.get(config["retrievers"][wildcards.retriever]["kind"])


@one_line
def retriever_tables(wildcards):
    """The dataset tables a retrieve job reads (its kind's ``reads``)."""
    return [t for t in kind_of(wildcards).reads if t in kinds.DATASET_TABLES]


@one_line
def retrieval_inputs(wildcards):
    """A retrieve job's files: the dataset tables its kind reads, the runs it fuses, the index it searches
    (unless prebuilt) and the built encoder it needs."""
    kind = kind_of(wildcards)
    files = {t: paths.data(wildcards.dataset, t) for t in retriever_tables(wildcards)}
    if "runs" in kind.reads:
        parts = config["retrievers"][wildcards.retriever]["runs"]
        files["runs"] = [paths.run(wildcards.dataset, part) for part in parts]
    if kind.index and not pbconfig.prebuilt_index(config, wildcards.dataset, wildcards.retriever):
        files["index"] = paths.index(wildcards.dataset, wildcards.retriever)
    return files | {"model": model_input(wildcards)}


@one_line
def retriever_device(wildcards):
    """The device of a kind that runs an encoder; None for the others, so a device change reruns only those."""
    return config["device"] if kind_of(wildcards).encoder else None


@one_line
def retriever_threads(wildcards):
    return config["threads"] if kind_of(wildcards).threaded else 1


@one_line
def alternation(names):
    """A wildcard constraint matching exactly these names."""
    import re

    return "|".join(re.escape(n) for n in names)


@one_line
def retriever_spec(wildcards):
    return pbconfig.sorted_keys(config["retrievers"][wildcards.retriever])


@one_line
def model_settings(model):
    """A models entry as a job's params (``posbias.config.model_settings``)."""
    return pbconfig.model_settings(config, model)


@one_line
def model_input(wildcards):
    """The built model folder a retriever needs, if its model is built by the workflow."""
    ref = config["retrievers"][wildcards.retriever].get("model")
    if ref in config["models"] and pbconfig.made_here(config["models"][ref]):
        return [paths.model(ref)]
    return []


@one_line
def model_path(wildcards):
    try:
        return resolve_model(config["retrievers"][wildcards.retriever]["model"], config["models"])
    except PosbiasError as exc:
        raise PosbiasError(f"retrievers.{wildcards.retriever}.model: {exc}") from None


@one_line
def dataset_params(wildcards):
    return pbconfig.data_settings(config["datasets"][wildcards.dataset])


@one_line
def dataset_files(wildcards):
    """The dataset's local files: inputs, so editing one reruns exactly what depends on it."""
    return pbconfig.dataset_files(config["datasets"][wildcards.dataset])


@one_line
def small_files(spec):
    """{path: what} of a dataset's topics, queries and qrels files: their jobs rerun when what their
    reader reads changes (the ``content`` param), not on a new time stamp (ancient inputs)."""
    return {path: what for _, what, path in pbconfig.named_files(spec) if what in pblocal.DIGESTED}


@one_line
def text_files(wildcards):
    """The files of a dataset's corpus and queries, where its qrels file is prepared apart."""
    spec = config["datasets"][wildcards.dataset]
    return [ancient(p) if p in small_files(spec) else p for p in pbconfig.text_files(spec)]


@one_line
def text_digests(wildcards):
    """The content digests of the small files among a dataset's text files (posbias.data.local)."""
    spec = config["datasets"][wildcards.dataset]
    small = small_files(spec)
    return {p: pblocal.content_digest(p, small[p]) for p in pbconfig.text_files(spec) if p in small}


@one_line
def qrels_input(wildcards):
    """A dataset's own qrels file, compared by content (qrels_digest), not by time stamp."""
    return ancient(pbconfig.qrels_file(config["datasets"][wildcards.dataset]))


@one_line
def qrels_digest(wildcards):
    return pblocal.content_digest(pbconfig.qrels_file(config["datasets"][wildcards.dataset]), "qrels")


QRELS_APART = [d for d, spec in config["datasets"].items() if pbconfig.qrels_file(spec)]
QRELS_WITH_TEXTS = [d for d in config["datasets"] if d not in QRELS_APART]


LISTWISE_DATASETS = pbconfig.listwise_datasets(config)
TRAINED = list(config.get("training", {}))
PROPENSITY = config["propensity"]


@one_line
def reranker_model_input(model):
    """The folder a reranker needs built or trained first (its own, or the one its `path` names)."""
    spec = config["models"][model]
    if not model_kinds.of(spec).weights:
        return []
    if pbconfig.made_here(spec):
        return [paths.model(model)]
    target = config["models"].get(spec.get("path"), {})
    if pbconfig.made_here(target):
        return [paths.model(spec["path"])]
    return []


@one_line
def model_gpus(model):
    """GPUs a job running ``model`` asks SLURM for: 1 for a language model with `device: cuda`, else 0."""
    spec = config["models"].get(model, {})
    return int(config["device"].startswith("cuda") and bool(spec) and model_kinds.of(spec).weights)


@one_line
def retriever_gpus(wildcards):
    """GPUs an index or retrieve job asks SLURM for: 1 for a kind that runs an encoder, with `device: cuda`."""
    return int(config["device"].startswith("cuda") and kind_of(wildcards).encoder)


@one_line
def reranker_model_path(model):
    if not model_kinds.of(config["models"][model]).weights:
        return None
    return resolve_model(model, config["models"])


RERANK_BATCHES = pbconfig.rerank_batches(config)
BATCH_OF_ORDER = pbconfig.batch_of_order(config)


def reranked(wildcards, order, debias, suffix):
    """Where one reranked order of the wildcards' experiment is read (its rerank job's batch folder, or a
    list-level method's combined run); an input names :func:`paths.producers` of such files."""
    return pbconfig.reranked_file(
        BATCH_OF_ORDER, wildcards.model, wildcards.dataset, wildcards.retriever, order, debias, suffix
    )


def producers_of(files, *suffixes, **options):
    """An input function: what a rule names to read ``files(wildcards, suffix, **options)`` for each suffix
    (:func:`paths.producers`: the batch folders, and a list-level method's combined files)."""
    return one_line(lambda w: paths.producers([f for suffix in suffixes for f in files(w, suffix, **options)]))


@one_line
def experiment_outputs(wildcards, suffix):
    """One file per order of a (model, dataset, retriever, debias) summary."""
    experiment = EXPERIMENTS[(wildcards.model, wildcards.dataset, wildcards.retriever)]
    return [
        reranked(wildcards, order, wildcards.debias, suffix)
        for order in pbconfig.orders_for(config, experiment, wildcards.debias)
    ]


@one_line
def batch_orders(wildcards):
    """The orders one rerank job reranks."""
    return RERANK_BATCHES[(wildcards.model, wildcards.dataset, wildcards.retriever, wildcards.debias, wildcards.part)]


STABILITY_TARGETS = pbconfig.stability_targets(config)
# whether some stability row is an adaptive budget (rule adaptive_savings)
ADAPTIVE_BUDGETS = pbconfig.adaptive_budgets(config)
# the trained pointwise variants scored outside the dev set (rule ocsft_settings_table)
OCSFT_SETTINGS = pbconfig.scored_pointwise_variants(config)
# OC-SFT and single order from one base, both scored outside the dev set (rule bases_pooled_table)
BASE_PAIRS = pbconfig.scored_base_pairs(config)
# OC-SFT's Table 1: pointwise passage reranking with shuffles (the other consumers have their own table)
RERANKING_EXPERIMENTS = [
    target[:3]
    for target in STABILITY_TARGETS
    if target[3] == "none"
    and pbconfig.is_pointwise(config, target[0])
    and pbconfig.consumer_of(config, target[1]) == consumers.PASSAGE_RERANKING
]
DECISION_TARGETS = pbconfig.decision_targets(config)
# The OC-SFT tables a config may not ask for: each is written only where the config gives it rows
TEACHER_STUDY = pbconfig.teacher_study(config)
LABEL_BUDGET = pbconfig.label_budget(config)
CHANNEL_PROBES = [target for target in STABILITY_TARGETS if debias.probe_channel(target[3])]
SERVED_WIDTHS = pbconfig.served_widths(config)  # checkpoints served at several window widths B
POOL_TARGETS = pbconfig.pool_targets(config)
QA_DATASETS = sorted({d for _, d, _ in DECISION_TARGETS if pbconfig.needs_reader(config, d)})
READER = config["consumers"]["multidoc_qa"]["reader"]


@one_line
def list_debias_inputs(wildcards, suffix):
    """The reranked shuffled lists (debias none) a list-level method aggregates."""
    return [reranked(wildcards, order, "none", suffix) for order in debias.lists(wildcards.debias)]


@one_line
def stability_orders(wildcards):
    """The canonical and shuffled orders of a pointwise experiment (position orders are not used)."""
    experiment = EXPERIMENTS[(wildcards.model, wildcards.dataset, wildcards.retriever)]
    return [o for o in pbconfig.orders_of(config, experiment) if not orders.is_kind(o, "position")]


@one_line
def stability_outputs(wildcards, suffix, debias=None):
    """The canonical and shuffled runs (or their costs) of one experiment, with the wildcard's debiasing
    method or ``debias``."""
    return [reranked(wildcards, order, debias or wildcards.debias, suffix) for order in stability_orders(wildcards)]


@one_line
def stability_plain(wildcards):
    """A debiasing method's plain runs (debias none) of the same presentations, for its shift from
    them, when the experiment has them."""
    experiment = EXPERIMENTS[(wildcards.model, wildcards.dataset, wildcards.retriever)]
    if wildcards.debias == "none" or "none" not in experiment.get("debias", ["none"]):
        return []
    return stability_outputs(wildcards, "parquet", "none")


@one_line
def stability_combine(wildcards):
    """How the stability job forms K > 1 presentations from disjoint groups of K shuffled orders: BSC@K's
    mean scores (a plain pointwise scorer), PermSC@K's rank aggregation (a plain listwise model's
    lists), or none (a debiasing method: K = 1 only)."""
    family = modes.family(config["models"][wildcards.model])
    if wildcards.debias != "none":
        return {"family": family, "combine": None}
    combine = debias.shuffle_combine(family)
    if combine == debias.AVERAGE_SCORES:
        return {"family": family, "combine": combine}
    return {"family": family, "combine": combine, **debias.options(config["reranking"], f"{combine}@1")}


@one_line
def reader_settings():
    """The QA reader's entry and its path resolved (a models entry, a local folder or an HF id)."""
    spec = config["readers"][READER]
    path = resolve_model(spec["path"], config["models"]) if model_kinds.of(spec).weights else None
    return {"spec": pbconfig.sorted_keys(spec), "path": path}


@one_line
def reader_input(wildcards):
    """The folder the QA reader needs built first, when its `path` names a built models entry."""
    if not pbconfig.needs_reader(config, wildcards.dataset):
        return []
    path = config["readers"][READER].get("path")
    return reranker_model_input(path) if path in config["models"] else []


@one_line
def qa_inputs(wildcards):
    """What a QA decisions job reads besides the runs: queries, passages, gold answers (none otherwise)."""
    if not pbconfig.needs_reader(config, wildcards.dataset):
        return {}
    return {part: paths.data(wildcards.dataset, part) for part in ("queries", "corpus", "answers")}


@one_line
def training_inputs(wildcards):
    """The train rule's inputs: the base model, a DeepSpeed config, and what the method's family reads
    (posbias.training.families: listwise instances (+ omega), or silver labels with queries and corpus)."""
    run = config["training"][wildcards.model]
    inputs = {"base": reranker_model_input(run["base_model"])}
    if run["hyper"].get("deepspeed"):
        inputs["deepspeed"] = run["hyper"]["deepspeed"]  # a config file the trainer reads
    return inputs | families.get(methods.get(run["method"]).family).inputs(config, run)


RERANK_RESULTS = {
    "metrics": [paths.rerank_metrics(*key) for key in SUMMARIES],
    "summaries": [paths.rerank_metrics(*key, "summary.parquet") for key in SUMMARIES],
    "curves": [paths.rerank_metrics(*key, "curve.parquet") for key in SUMMARIES],
    "first_stage": sorted({paths.retrieval_metrics(d, r) for _, d, r, _ in SUMMARIES}),
}


@one_line
def paper_inputs(entries, name):
    """The result files a registered paper table or figure reads (posbias.paper)."""
    return {key: RERANK_RESULTS[key] for key in paper.needs(entries[name])}
