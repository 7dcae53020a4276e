"""Collections from local files: a BEIR folder, or TREC-style topics, qrels and a corpus.

Formats:

- BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``),
  ``qrels/<split>.tsv`` (header ``query-id corpus-id score``).
- Topics: ``qid<TAB>text`` lines (``.tsv``, optionally gzipped) or BEIR-style ``.jsonl``.
- Qrels: TREC ``qid iter docid rel`` lines, or a BEIR ``.tsv`` with a header.
- Corpus: ``docid<TAB>text`` (``.tsv``, optionally with a title column ``docid<TAB>title<TAB>text``) or
  ``.jsonl`` with ``_id``/``docid``/``id``, ``title`` and ``text``/``contents``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError


def require_file(path: str | Path, what: str, key: str) -> Path:
    """Return ``path`` as a Path, or raise naming the config key and the missing file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PosbiasError(f"{key}: {what} file {path} does not exist; fix the path in the config")
    return path


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        for lineno, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield lineno, line


def _jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    for lineno, line in _lines(path):
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise PosbiasError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None


def _first_key(record: dict, keys: tuple[str, ...], path: Path, lineno: int) -> str:
    for key in keys:
        if key in record:
            return str(record[key])
    raise PosbiasError(f"{path}:{lineno}: a record needs one of the fields {list(keys)}")


def read_topics(path: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    if ".jsonl" in path.suffixes or ".json" in path.suffixes:
        for lineno, rec in _jsonl(path):
            ids.append(_first_key(rec, ("_id", "query_id", "qid", "id"), path, lineno))
            texts.append(_first_key(rec, ("text", "query", "title"), path, lineno))
        return ids, texts
    for lineno, line in _lines(path):
        cols = line.split("\t")
        if len(cols) < 2:
            raise PosbiasError(f"{path}:{lineno}: a topics line needs `qid<TAB>text`, found {line[:60]!r}")
        ids.append(cols[0].strip())
        texts.append(cols[1].strip())
    return ids, texts


def read_qrels(path: Path) -> tuple[list[str], list[str], list[int]]:
    qids, dids, rels = [], [], []
    for lineno, line in _lines(path):
        cols = line.split()
        if lineno == 1 and cols[:2] == ["query-id", "corpus-id"]:
            continue  # BEIR header
        if len(cols) == 3:  # BEIR: qid docid score
            qid, did, rel = cols
        elif len(cols) == 4:  # TREC: qid iter docid rel
            qid, _, did, rel = cols
        else:
            raise PosbiasError(
                f"{path}:{lineno}: a qrels line needs `qid iter docid rel` (TREC) or `qid docid rel` (BEIR), "
                f"found {len(cols)} columns"
            )
        try:
            rels.append(int(rel))
        except ValueError:
            raise PosbiasError(f"{path}:{lineno}: relevance {rel!r} is not an integer") from None
        qids.append(qid)
        dids.append(did)
    return qids, dids, rels


def read_corpus(path: Path) -> tuple[list[str], list[str], list[str]]:
    ids, titles, texts = [], [], []
    if ".jsonl" in path.suffixes:
        for lineno, rec in _jsonl(path):
            ids.append(_first_key(rec, ("_id", "docid", "doc_id", "id"), path, lineno))
            titles.append(str(rec.get("title") or ""))
            texts.append(_first_key(rec, ("text", "contents", "content"), path, lineno))
        return ids, titles, texts
    for lineno, line in _lines(path):
        cols = line.split("\t")
        if len(cols) == 2:
            ids.append(cols[0])
            titles.append("")
            texts.append(cols[1])
        elif len(cols) == 3:
            ids.append(cols[0])
            titles.append(cols[1])
            texts.append(cols[2])
        else:
            raise PosbiasError(f"{path}:{lineno}: a corpus line needs `docid<TAB>text` or `docid<TAB>title<TAB>text`")
    return ids, titles, texts


def load_beir(folder: str, split: str, key: str = "datasets") -> Collection:
    """Load a BEIR-format folder; ``split`` picks ``qrels/<split>.tsv``."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise PosbiasError(f"{key}.path: BEIR folder {root} does not exist")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        found = sorted(p.name for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        raise PosbiasError(
            f"{key}: BEIR folder {root} has no qrels/{split}.tsv (found {found or 'no qrels folder'}); "
            "add the qrels or set `split` to one that exists"
        )
    ids, titles, texts = read_corpus(require_file(root / "corpus.jsonl", "corpus", key))
    qids, qtexts = read_topics(require_file(root / "queries.jsonl", "queries", key))
    return Collection(
        corpus=corpus_frame(ids, texts, titles),
        queries=queries_frame(qids, qtexts),
        qrels=qrels_frame(*read_qrels(qrels_path)),
    )


def load_trec(topics: str, qrels: str, corpus: str, key: str = "datasets") -> Collection:
    """Load topics, qrels and a corpus from separate files."""
    ids, titles, texts = read_corpus(require_file(corpus, "corpus", f"{key}.corpus"))
    qids, qtexts = read_topics(require_file(topics, "topics", f"{key}.topics"))
    return Collection(
        corpus=corpus_frame(ids, texts, titles),
        queries=queries_frame(qids, qtexts),
        qrels=qrels_frame(*read_qrels(require_file(qrels, "qrels", f"{key}.qrels"))),
    )
