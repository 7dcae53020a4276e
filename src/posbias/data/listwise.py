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
- ``rank_llm``: the RankZephyr / FIRST training files as published (one conversation per line:
  ``{"id", "conversations": [{"from": "system" | "human" | "gpt", "value"}, ...]}``, or ``messages``
  with ``role`` / ``content``): the user turn lists the passages as ``[1] text`` or ``[A] text``
  lines between the instruction and ``Search Query: …``, the assistant turn is the GPT-4 teacher's
  ``[4] > [2] > …``. Passages have no ids there; each gets ``p`` + the first 16 hex digits of the
  SHA-1 of its text, so a passage shared by several instances is one corpus entry. Identifiers the
  teacher left out are appended in input order (as rank_llm parses), and counted.
- ``trec_run``: a teacher's reranking as a TREC run (``path``, e.g. rank_llm's RankGPT reranks of BM25's top
  100), over the first stage's candidates with their texts (``candidates``: a rank_llm candidates JSON, which
  gives the input order). Each query's candidate list is cut into windows of ``n_candidates`` passages sliding
  by half a window (the reranking's 20 / 10; ours, where the papers are silent), from the top; each window is
  an instance whose teacher order is the run's order restricted to the window. Candidates the run does not
  rank follow the ranked ones in input order, counted.
"""

from __future__ import annotations

import hashlib
import logging
import re
import zlib
from pathlib import Path

import polars as pl

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError
from posbias.textfiles import jsonl, require_file
from posbias.permute import fisher_yates
from posbias.prompts import IDENTIFIERS

log = logging.getLogger(__name__)


def _instance_jsonl(rec: dict, path: Path, lineno: int) -> tuple[dict, dict[str, int]]:
    for key in ("query_id", "query", "candidates", "ranking"):
        if key not in rec:
            raise PosbiasError(f"{path}:{lineno}: a listwise instance needs `{key}`")
    if not isinstance(rec["candidates"], list):
        raise PosbiasError(f"{path}:{lineno}: `candidates` must be a list of {{docid, text}} objects")
    for j, c in enumerate(rec["candidates"]):
        missing = [k for k in ("docid", "text") if not isinstance(c, dict) or k not in c]
        if missing:
            raise PosbiasError(f"{path}:{lineno}: candidate {j} lacks {missing}; every candidate needs `docid` "
                               "and `text`")
    doc_ids = [str(c["docid"]) for c in rec["candidates"]]
    repeated = sorted({d for d in doc_ids if doc_ids.count(d) > 1})
    if repeated:
        raise PosbiasError(f"{path}:{lineno}: doc id {repeated[0]!r} is a candidate more than once; a candidate "
                           "list names each passage once: drop the repeats")
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


_PASSAGE = re.compile(r"^\[(\w+)\] ?(.*)$")
_IDENTIFIER = re.compile(r"\[(\w+)\]")


def _turns(rec: dict, path: Path, lineno: int) -> tuple[str, str]:
    """(user turn, assistant turn) of a rank_llm training conversation."""
    turns = rec.get("conversations") or rec.get("messages")
    if not isinstance(turns, list):
        raise PosbiasError(f"{path}:{lineno}: a rank_llm training record needs `conversations` (or `messages`)")
    role = {"human": "user", "gpt": "assistant"}
    by_role = {role.get(t.get("from", t.get("role")), t.get("from", t.get("role"))): t.get("value", t.get("content"))
               for t in turns}
    if not by_role.get("user") or not by_role.get("assistant"):
        raise PosbiasError(f"{path}:{lineno}: the conversation needs a user (human) and an assistant (gpt) turn")
    return by_role["user"], by_role["assistant"]


def _instance_rank_llm(rec: dict, path: Path, lineno: int) -> tuple[dict, int]:
    """One listwise instance from a RankZephyr / FIRST training conversation, and the identifiers the
    teacher's answer left out."""
    user, answer = _turns(rec, path, lineno)
    head, sep, tail = user.rpartition("Search Query:")
    if not sep:
        raise PosbiasError(f"{path}:{lineno}: the user turn has no `Search Query:` line")
    query = tail.strip().split("\n", 1)[0].strip().removesuffix(".")
    labels, texts = [], []
    for line in head.splitlines():
        match = _PASSAGE.match(line.strip())
        if match:
            labels.append(match.group(1))
            texts.append(match.group(2).strip())
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise PosbiasError(f"{path}:{lineno}: expected at least 2 distinct `[id] passage` lines, found {labels}")
    doc_ids = ["p" + hashlib.sha1(t.encode()).hexdigest()[:16] for t in texts]
    if len(set(doc_ids)) != len(doc_ids):
        raise PosbiasError(f"{path}:{lineno}: two passages of one instance have the same text")
    index = {label: i for i, label in enumerate(labels)}
    order: list[int] = []
    for label in _IDENTIFIER.findall(answer):
        if label in index and index[label] not in order:
            order.append(index[label])
    missing = len(labels) - len(order)
    order += [i for i in range(len(labels)) if i not in order]
    inst = {"query_id": str(rec.get("id", lineno)), "query": query, "doc_ids": doc_ids, "texts": texts,
            "teacher_ranking": [doc_ids[i] for i in order]}
    return inst, missing


def teacher_windows(first_stage: list[str], teacher: list[str], size: int) -> list[tuple[list[str], list[str]]]:
    """(window in input order, its teacher order) for windows of ``size`` over ``first_stage`` sliding by
    ``size // 2`` from the top, the last one ending at the list's end; the teacher order is ``teacher``'s order
    restricted to the window, then the window's passages ``teacher`` does not rank, in input order."""
    step = max(size // 2, 1)
    starts = list(range(0, max(len(first_stage) - size, 0) + 1, step))
    if starts[-1] + size < len(first_stage):
        starts.append(len(first_stage) - size)
    rank = {d: i for i, d in enumerate(teacher)}
    out = []
    for start in starts:
        window = first_stage[start:start + size]
        out.append((window, sorted(window, key=lambda d: (d not in rank, rank.get(d, 0), window.index(d)))))
    return out


def _trec_run_instances(spec: dict, key: str) -> tuple[list[dict], int]:
    """The ``trec_run`` format's instances, and how many windows hold passages the teacher did not rank."""
    from posbias.data.imported import read_rank_llm
    from posbias.runs import read_trec

    if not spec.get("candidates"):
        raise PosbiasError(f"config: {key}.candidates: format trec_run needs the first stage's candidates with "
                           "their texts (a rank_llm candidates JSON); set it")
    teacher_path = require_file(spec["path"], "listwise", f"{key}.path")
    queries, passages, first_stage, _ = read_rank_llm(require_file(spec["candidates"], "listwise", f"{key}.candidates"))
    teacher = {q: g["doc_id"].to_list() for (q,), g in read_trec(teacher_path).group_by("query_id", maintain_order=True)}
    unranked, instances = 0, []
    for (qid,), group in first_stage.group_by("query_id", maintain_order=True):
        if qid not in teacher:
            continue  # a query the teacher did not rerank: no target
        for i, (window, order) in enumerate(teacher_windows(group["doc_id"].to_list(), teacher[qid],
                                                           spec["n_candidates"])):
            unranked += any(d not in teacher[qid] for d in window)
            instances.append({"query_id": f"{qid}-w{i}", "query": queries[qid], "doc_ids": window,
                              "texts": [passages[d] for d in window], "teacher_ranking": order})
    if not instances:
        raise PosbiasError(f"{teacher_path}: no query of the teacher's run is among the candidates of "
                           f"{spec['candidates']}; give the run of the same queries")
    return instances, unranked


def load(spec: dict, key: str, seed: int) -> Collection:
    """Load a listwise training file into a collection whose ``listwise`` table holds the instances."""
    if spec["format"] == "trec_run":
        instances, unranked = _trec_run_instances(spec, key)
        if unranked:
            log.warning("%s: %d of %d windows hold passages the teacher's run does not rank; they follow the ranked "
                        "ones in input order", spec["path"], unranked, len(instances))
        return _collection(instances, [], [], [])
    path = require_file(spec["path"], "listwise", f"{key}.path")
    instances, rq, rd, rel, incomplete = [], [], [], [], 0
    for lineno, rec in jsonl(path):
        if spec["format"] == "jsonl":
            inst, grades = _instance_jsonl(rec, path, lineno)
        elif spec["format"] == "rank_llm":
            inst, missing = _instance_rank_llm(rec, path, lineno)
            grades, incomplete = {}, incomplete + (missing > 0)
        else:
            inst, grades = _instance_tevatron(rec, path, lineno, spec["n_candidates"], seed)
        if len(inst["doc_ids"]) > len(IDENTIFIERS):
            raise PosbiasError(f"{path}:{lineno}: {len(inst['doc_ids'])} candidates, more than the {len(IDENTIFIERS)} "
                               f"identifiers [{IDENTIFIERS[0]}]…[{IDENTIFIERS[-1]}] of a First prompt; cut the "
                               f"instance to {len(IDENTIFIERS)} candidates (they all sit in one training window)")
        instances.append(inst)
        for did, grade in grades.items():
            rq.append(inst["query_id"])
            rd.append(did)
            rel.append(grade)
    if not instances:
        raise PosbiasError(f"{path}: the listwise file has no instances")
    if incomplete:
        log.warning("%s: %d of %d teacher rankings leave passages out; appended in input order",
                    path, incomplete, len(instances))
    return _collection(instances, rq, rd, rel)


def _collection(instances: list[dict], rq: list[str], rd: list[str], rel: list[int]) -> Collection:
    """The instances as a collection: its corpus (each passage once), queries, qrels and listwise table."""
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
