"""Imported first-stage candidate lists that carry passage texts.

Two formats, chosen per run with ``format``:

- ``rank_llm``: the JSON list written by rank_llm / RankGPT tooling,
  ``[{"query": str, "hits": [{"qid", "docid", "rank", "score", "content"}, ...]}, ...]``.
  Queries, the corpus (the union of all hit passages) and the run all come from it.
- ``trec``: a six-column TREC run file; the passage texts then come from the dataset's ``corpus``
  file and the query texts from its ``topics`` file.

Each run becomes retriever ``imported:<name>`` of the dataset.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import polars as pl

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias import textfiles
from posbias.data.local import read_corpus, read_qrels, read_topics
from posbias.errors import PosbiasError
from posbias.textfiles import require_file
from posbias.runs import canonical, read_trec

log = logging.getLogger(__name__)


def read_rank_llm(path: Path) -> tuple[dict[str, str], dict[str, str], pl.DataFrame, list[tuple[int, str]]]:
    """Parse a rank_llm candidates JSON into (queries, passages, canonical run, (index, query) of the records without hits).

    A record names its query id only in its hits, so a record without hits is a query the run cannot
    name: :func:`load` refuses it unless a ``topics`` file names every query."""
    records = textfiles.read_json(path)
    if not isinstance(records, list):
        raise PosbiasError(f"{path}: expected a JSON list of {{query, hits}} records, found a {type(records).__name__}")
    queries: dict[str, str] = {}
    passages: dict[str, str] = {}
    rows: dict[str, list] = {"query_id": [], "doc_id": [], "score": []}
    no_hits: list[tuple[int, str]] = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "query" not in rec or "hits" not in rec:
            raise PosbiasError(f"{path}: record {i} lacks `query` or `hits`; this is not the rank_llm format")
        if not isinstance(rec["hits"], list):
            raise PosbiasError(f"{path}: record {i}: `hits` must be a list of hits, found a {type(rec['hits']).__name__}")
        if not rec["hits"]:
            no_hits.append((i, rec["query"]))
            continue
        for j, hit in enumerate(rec["hits"]):
            missing = [k for k in ("qid", "docid", "score", "content") if not isinstance(hit, dict) or k not in hit]
            if missing:
                raise PosbiasError(f"{path}: record {i} hit {j} lacks {missing}")
            score = hit["score"]
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                raise PosbiasError(f"{path}: record {i} hit {j} (doc {hit['docid']}): score {score!r} is not a finite "
                                   "number; fix or drop the hit")
            qid, did = str(hit["qid"]), str(hit["docid"])
            queries[qid] = rec["query"]
            passages.setdefault(did, hit["content"])
            rows["query_id"].append(qid)
            rows["doc_id"].append(did)
            rows["score"].append(float(score))
    if not rows["query_id"]:
        raise PosbiasError(f"{path}: no record has any hits; the run is empty")
    return queries, passages, canonical(pl.DataFrame(rows)), no_hits


def load(spec: dict, key: str, qrels: bool = True) -> Collection:
    """Load an ``imported`` dataset: qrels (not with ``qrels=False``: empty), optional topics/corpus files
    and one or more runs."""
    queries: dict[str, str] = {}
    passages: dict[str, str] = {}
    runs: dict[str, pl.DataFrame] = {}
    for name, run_spec in spec["runs"].items():
        run_key = f"{key}.runs.{name}"
        path = require_file(run_spec["path"], "run", run_key)
        if run_spec["format"] == "rank_llm":
            q, p, run, no_hits = read_rank_llm(path)
            if no_hits and not spec.get("topics"):
                raise PosbiasError(
                    f"{path}: record {no_hits[0][0]} (query {no_hits[0][1]!r}) and {len(no_hits) - 1} more have no hits, and a "
                    "record names its query id only in its hits: those queries and their judgements would leave "
                    f"the evaluation unseen; give {key} a `topics` file (they then score 0) or drop the records")
            if no_hits:
                log.info("%s: %d records have no hits; their queries (from the topics file) score 0", path,
                         len(no_hits))
            for qid, text in q.items():
                queries.setdefault(qid, text)
            for did, text in p.items():
                passages.setdefault(did, text)
        else:
            if not spec.get("corpus"):
                raise PosbiasError(f"{run_key}: a `trec` run needs the dataset's `corpus` file for passage texts")
            run = read_trec(path)
        runs[f"imported:{name}"] = run
    if spec.get("corpus"):
        ids, titles, texts = read_corpus(require_file(spec["corpus"], "corpus", f"{key}.corpus"))
        for did, title, text in zip(ids, titles, texts):
            passages.setdefault(did, f"{title} {text}".strip())
    if spec.get("topics"):
        qids, qtexts = read_topics(require_file(spec["topics"], "topics", f"{key}.topics"))
        queries.update(zip(qids, qtexts))
    for name, run in runs.items():
        unknown = set(run["doc_id"].to_list()) - passages.keys()
        if unknown:
            raise PosbiasError(
                f"{key}.runs.{name.split(':', 1)[1]}: {len(unknown)} doc ids of the run have no passage text "
                f"(e.g. {sorted(unknown)[0]}); add them to the `corpus` file"
            )
        missing_q = set(run["query_id"].to_list()) - queries.keys()
        if missing_q:
            raise PosbiasError(
                f"{key}.runs.{name.split(':', 1)[1]}: {len(missing_q)} query ids of the run have no text "
                f"(e.g. {sorted(missing_q)[0]}); add a `topics` file"
            )
    return Collection(
        corpus=corpus_frame(list(passages), list(passages.values())),
        queries=queries_frame(list(queries), list(queries.values())),
        qrels=qrels_frame(*read_qrels(require_file(spec["qrels"], "qrels", f"{key}.qrels"))) if qrels
        else qrels_frame(),
        runs=runs,
    )
