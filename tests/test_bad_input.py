"""Bad input gets one clear line, early: the matrix of mistakes a user can make.

Every case runs the real workflow (``snakemake`` in a scratch directory) on a small valid setup with one
thing broken, and asserts the exit status, that the console names the culprit (the config key, or the
file and line, and the fix) without a Python traceback, and that the failed job left no output.

- ``early``: the config alone shows the mistake; ``snakemake -n`` refuses it before any job runs.
- ``job``: the data shows it; the job that reads the file fails with one line, its outputs removed.
- ``normalised``: a documented normalisation (a UTF-8 byte-order mark is dropped); the run succeeds
  and the result is the one without the mark.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

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
SIM = {"kind": "simulated", "prior": "linear", "strength": 1.0}


def _config(dataset: str = "trec") -> dict:
    """One dataset of the given kind, and (on the imported TREC run) one cheap reranking experiment."""
    cfg = {"datasets": {"mine": copy.deepcopy(DATASETS[dataset])}, "retrievers": {}, "models": {"sim": SIM}}
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


# (id, dataset kind, config edit, {file: new content (str or bytes)}, expected fragment, stage)
CASES = [
    # --- config: refused before any job runs
    ("dup-yaml-key", "trec", None, {}, "key 'retrievers' appears twice in one mapping", "early"),
    ("retriever-twice", "trec", lambda c: _set(c, "datasets.mine.retrievers", ["bm25", "bm25"]) and _set(
        c, "retrievers.bm25", {"kind": "bm25"}), {}, "datasets.mine.retrievers", "early"),
    ("step-above-window", "imported", lambda c: _set(c, "reranking.step", 3), {},
     "reranking.step 3 is larger than reranking.window 2", "early"),
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
    # --- topics
    ("topics-not-utf8", "trec", None, {"topics.tsv": b"q1\tcaf\xe9 query\nq2\tsecond\n"},
     "in/topics.tsv:1: byte 0xe9 at column 7 is not UTF-8", "job"),
    ("topics-blank", "trec", None, {"topics.tsv": "\n  \n\n"}, "in/topics.tsv: the topics file has no topics", "job"),
    ("topics-empty-text", "trec", None, {"topics.tsv": "q1\t \nq2\tsecond\n"}, "in/topics.tsv:1: topic 'q1' has an empty text",
     "job"),
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
    # --- model specs and data-dependent settings (the reranking job)
    ("relevant-grade-above-qrels", "imported", lambda c: _set(c, "reranking.relevant_grade", 5), {},
     "reranking.relevant_grade 5: no query of mine has a passage graded that high", "job"),
    ("unknown-hf-model", "imported", lambda c: _set(c, "models.sim", {"kind": "causal_lm", "path": "no-such-org/no-such-model"}),
     {}, "model 'no-such-org/no-such-model' cannot be loaded", "job"),
    ("model-path-missing", "imported", lambda c: _set(c, "models.sim", {"kind": "causal_lm", "path": "./models/nope"}), {},
     "models.sim.path ./models/nope: no such local model folder", "early"),
    # --- documented normalisation
    ("topics-bom", "trec", None, {"topics.tsv": b"\xef\xbb\xbf" + TOPICS.encode()}, None, "normalised"),
    ("qrels-bom", "trec", None, {"qrels.txt": b"\xef\xbb\xbf" + QRELS.encode()}, None, "normalised"),
    ("run-json-bom", "rank_llm", None, {"run.json": b"\xef\xbb\xbf" + json.dumps(HITS).encode()}, None, "normalised"),
]


RERANK_FAILURES = {"relevant-grade-above-qrels", "unknown-hf-model"}


def _setup(workdir: Path, dataset: str, edit, files: dict) -> Path:
    for name, text in {**FILES, **files}.items():
        path = workdir / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            continue
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    cfg = _config(dataset)
    if edit is not None:
        cfg = edit(cfg)
    out = workdir / "bad.yaml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


@pytest.mark.parametrize(("name", "dataset", "edit", "files", "expected", "stage"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_one_clear_line(workdir, monkeypatch, name, dataset, edit, files, expected, stage):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    configfile = _setup(workdir, dataset, edit, files)
    if name == "dup-yaml-key":
        configfile.write_text(configfile.read_text() + "retrievers: {}\n")
    target = "reranking" if dataset == "imported" and stage != "early" else "data"
    out = snakemake(workdir, "--cores", "1", *(["-n"] if stage == "early" else []), target, configfile=configfile)
    console = out.stdout + out.stderr
    if stage == "normalised":
        assert out.returncode == 0, console[-3000:]
        queries = pl.read_parquet(workdir / "results" / "data" / "mine" / "queries.parquet")
        qrels = pl.read_parquet(workdir / "results" / "data" / "mine" / "qrels.parquet")
        assert queries["query_id"][0] == "q1" and "q1" in qrels["query_id"].to_list(), (queries, qrels)
        return
    assert out.returncode != 0, console[-3000:]
    assert expected in console, console[-3000:]
    assert "Traceback" not in console, console[-3000:]
    if stage == "early":
        assert not (workdir / "results").exists() and not (workdir / "logs").exists()
        return
    assert "posbias: " in console  # the failed job's one line, pointing at its log
    if name in RERANK_FAILURES:  # the position-1 job (or every job of a model that cannot load) failed
        assert not list((workdir / "results" / "rerank").rglob("position-1/*")) if (workdir / "results").exists() else True
    else:
        assert not (workdir / "results" / "data" / "mine" / "corpus.parquet").exists()
        assert not (workdir / "results" / "data" / "mine" / "queries.parquet").exists()


def test_the_matrix_covers_every_input_kind():
    """At least 50 cases, none of them silent, across config, every file kind and model specs."""
    stages = [c[5] for c in CASES]
    assert len(CASES) >= 50 and set(stages) == {"early", "job", "normalised"}
    ids = " ".join(c[0] for c in CASES)
    for kind in ("topics", "qrels", "corpus", "run-", "rank-llm", "beir", "listwise", "model", "hyper"):
        assert kind in ids, kind
