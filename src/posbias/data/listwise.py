"""Listwise training sets: queries with candidate lists and a teacher permutation.

Formats (``format`` in the dataset's config):

- ``jsonl``: one instance per line,
  ``{"query_id", "query", "candidates": [{"docid", "text"}, ...], "ranking": [docid, ...]}``;
  ``candidates`` are in input (first-stage) order, ``ranking`` is the teacher's best-first order of
  the same doc ids (the RankZephyr / FIRST training data, exported from their conversations).
  An optional ``"relevance": {docid: grade}`` becomes qrels.
- ``tevatron``: ``{"query_id", "query", "positive_passages": [...], "negative_passages": [...]}``
  with ``{"docid", "text"}`` passages, where only positives and negatives exist (the MS MARCO
  training sample). Candidates are all positives then negatives in file order, cut to
  ``n_candidates``; their input order is a seeded shuffle (no first-stage order is known), and the
  teacher is the qrels oracle: positives first, then negatives, each group in input order.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import polars as pl

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.data.local import _jsonl, require_file
from posbias.errors import PosbiasError
from posbias.permute import fisher_yates


def _instance_jsonl(rec: dict, path: Path, lineno: int) -> tuple[dict, dict[str, int]]:
    for key in ("query_id", "query", "candidates", "ranking"):
        if key not in rec:
            raise PosbiasError(f"{path}:{lineno}: a listwise instance needs `{key}`")
    doc_ids = [str(c["docid"]) for c in rec["candidates"]]
    ranking = [str(d) for d in rec["ranking"]]
    if sorted(ranking) != sorted(doc_ids):
        raise PosbiasError(f"{path}:{lineno}: `ranking` must be a permutation of the candidates' doc ids")
    inst = {
        "query_id": str(rec["query_id"]),
        "query": rec["query"],
        "doc_ids": doc_ids,
        "texts": [c["text"] for c in rec["candidates"]],
        "teacher_ranking": ranking,
    }
    return inst, {str(k): int(v) for k, v in rec.get("relevance", {}).items()}


def _instance_tevatron(rec: dict, path: Path, lineno: int, n_candidates: int, seed: int) -> tuple[dict, dict]:
    for key in ("query_id", "query", "positive_passages", "negative_passages"):
        if key not in rec:
            raise PosbiasError(f"{path}:{lineno}: a tevatron record needs `{key}`")
    seen: set[str] = set()
    passages: list[tuple[str, str, int]] = []
    for grade, group in ((1, rec["positive_passages"]), (0, rec["negative_passages"])):
        for p in group:
            did = str(p["docid"])
            if did not in seen:
                seen.add(did)
                passages.append((did, p["text"], grade))
    passages = passages[:n_candidates]
    qid = str(rec["query_id"])
    order = fisher_yates(passages, seed + zlib.crc32(qid.encode()))
    teacher = [d for d, _, g in order if g == 1] + [d for d, _, g in order if g == 0]
    inst = {
        "query_id": qid,
        "query": rec["query"],
        "doc_ids": [d for d, _, _ in order],
        "texts": [t for _, t, _ in order],
        "teacher_ranking": teacher,
    }
    return inst, {d: g for d, _, g in passages}


def load(spec: dict, key: str, seed: int) -> Collection:
    """Load a listwise training file into a collection whose ``listwise`` table holds the instances."""
    path = require_file(spec["path"], "listwise", f"{key}.path")
    instances, rq, rd, rel = [], [], [], []
    for lineno, rec in _jsonl(path):
        if spec["format"] == "jsonl":
            inst, grades = _instance_jsonl(rec, path, lineno)
        else:
            inst, grades = _instance_tevatron(rec, path, lineno, spec.get("n_candidates", 20), seed)
        instances.append(inst)
        for did, grade in grades.items():
            rq.append(inst["query_id"])
            rd.append(did)
            rel.append(grade)
    if not instances:
        raise PosbiasError(f"{path}: the listwise file has no instances")
    listwise = pl.DataFrame(instances)
    passages = (
        listwise.select("doc_ids", "texts").explode("doc_ids", "texts").unique("doc_ids", keep="first", maintain_order=True)
    )
    return Collection(
        corpus=corpus_frame(passages["doc_ids"].to_list(), passages["texts"].to_list()),
        queries=queries_frame(listwise["query_id"].to_list(), listwise["query"].to_list()),
        qrels=qrels_frame(rq, rd, rel),
        listwise=listwise,
    )
