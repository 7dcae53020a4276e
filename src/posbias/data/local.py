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

import hashlib
from pathlib import Path

from posbias import textfiles
from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError
from posbias.textfiles import require_file


def _first_key(record: dict, keys: tuple[str, ...], path: Path, lineno: int) -> str:
    for key in keys:
        if key in record and record[key] is not None:
            return str(record[key])
    raise PosbiasError(f"{path}:{lineno}: a record needs one of the fields {list(keys)}")


def _unique(ids: list[str], linenos: list[int], path: Path, what: str) -> None:
    """One-line error naming both lines of the first id that occurs twice."""
    first: dict[str, int] = {}
    for i, lineno in zip(ids, linenos):
        if i in first:
            raise PosbiasError(f"{path}:{lineno}: {what} id {i!r} occurs again (first at line {first[i]}); "
                               f"{what} ids must be unique: remove the duplicate")
        first[i] = lineno


def read_topics(path: Path) -> tuple[list[str], list[str]]:
    """Topic ids and texts; an empty text, a repeated id or a file without topics is an error."""
    ids, texts, linenos = [], [], []
    if ".jsonl" in path.suffixes or ".json" in path.suffixes:
        for lineno, rec in textfiles.jsonl(path):
            ids.append(_first_key(rec, ("_id", "query_id", "qid", "id"), path, lineno))
            texts.append(_first_key(rec, ("text", "query", "title"), path, lineno).strip())
            linenos.append(lineno)
    else:
        for lineno, line in textfiles.lines(path):
            cols = line.split("\t")
            if len(cols) < 2:
                raise PosbiasError(f"{path}:{lineno}: a topics line needs `qid<TAB>text`, found {line[:60]!r}")
            if len(cols) > 2:  # a column past the text would be dropped unseen (the corpus reader refuses it too)
                raise PosbiasError(f"{path}:{lineno}: a topics line needs `qid<TAB>text`, found {len(cols)} "
                                   "tab-separated columns; drop the extra columns or replace tabs in the text")
            ids.append(cols[0].strip())
            texts.append(cols[1].strip())
            linenos.append(lineno)
    if not ids:
        raise PosbiasError(f"{path}: the topics file has no topics; check the file or the `topics` path")
    for i, text, lineno in zip(ids, texts, linenos):
        if not i or not text:
            raise PosbiasError(f"{path}:{lineno}: topic {i!r} has an empty {'text' if i else 'id'}; "
                               "give every topic an id and a text")
    _unique(ids, linenos, path, "topic")
    return ids, texts


def read_qrels(path: Path) -> tuple[list[str], list[str], list[int]]:
    """Judgements; identical repeated lines are kept once, a (query, doc) judged twice with two
    different grades is an error, and so is a file without judgements."""
    qids, dids, rels = [], [], []
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for lineno, line in textfiles.lines(path):
        cols = line.split()
        if not qids and not seen and cols[:2] == ["query-id", "corpus-id"]:
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
            grade = int(rel)
        except ValueError:
            raise PosbiasError(f"{path}:{lineno}: relevance {rel!r} is not an integer") from None
        if (qid, did) in seen:
            before, line_before = seen[(qid, did)]
            if before != grade:
                raise PosbiasError(f"{path}:{lineno}: query {qid} doc {did} is judged {grade} here and {before} at "
                                   f"line {line_before}; keep one judgement")
            continue
        seen[(qid, did)] = grade, lineno
        qids.append(qid)
        dids.append(did)
        rels.append(grade)
    if not qids:
        raise PosbiasError(f"{path}: the qrels file has no judgements; check the file or the `qrels` path")
    return qids, dids, rels


# The small files whose content, as their reader reads it, decides whether their data job reruns
# (:func:`content_digest`); a corpus can be gigabytes and is compared by its time stamp as usual.
DIGESTED = {"topics": read_topics, "queries": read_topics, "qrels": read_qrels}


def content_digest(path: str, what: str) -> str:
    """A digest of what the reader of ``what`` (a key of :data:`DIGESTED`) makes of the file: a blank
    line, a byte-order mark, CRLF line ends or a repeated identical judgement change nothing. A file the
    reader refuses is digested by its bytes, so its job runs and fails with the reader's line."""
    try:
        content = repr(DIGESTED[what](Path(path))).encode()
    except (PosbiasError, OSError):
        content = Path(path).read_bytes() if Path(path).is_file() else b""
    return hashlib.blake2b(content, digest_size=16).hexdigest()


def read_corpus(path: Path) -> tuple[list[str], list[str], list[str]]:
    """Doc ids, titles and texts; a repeated doc id is an error naming both lines."""
    ids, titles, texts, linenos = [], [], [], []
    if ".jsonl" in path.suffixes:
        for lineno, rec in textfiles.jsonl(path):
            ids.append(_first_key(rec, ("_id", "docid", "doc_id", "id"), path, lineno))
            titles.append(str(rec.get("title") or ""))
            texts.append(_first_key(rec, ("text", "contents", "content"), path, lineno))
            linenos.append(lineno)
    else:
        for lineno, line in textfiles.lines(path):
            cols = line.split("\t")
            if len(cols) not in (2, 3):
                raise PosbiasError(f"{path}:{lineno}: a corpus line needs `docid<TAB>text` or "
                                   "`docid<TAB>title<TAB>text`")
            ids.append(cols[0])
            titles.append(cols[1] if len(cols) == 3 else "")
            texts.append(cols[-1])
            linenos.append(lineno)
    if not ids:
        raise PosbiasError(f"{path}: the corpus file has no documents; check the file or the `corpus` path")
    _unique(ids, linenos, path, "doc")
    return ids, titles, texts


def load_beir(folder: str, split: str, key: str = "datasets", qrels: bool = True) -> Collection:
    """Load a BEIR-format folder; ``split`` picks ``qrels/<split>.tsv`` (not read with ``qrels=False``:
    the collection's qrels are then empty)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise PosbiasError(f"{key}.path: BEIR folder {root} does not exist" + (" (it is a file)" if root.exists() else ""))
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
        qrels=qrels_frame(*read_qrels(qrels_path)) if qrels else qrels_frame(),
    )


def load_trec(topics: str, qrels: str | None, corpus: str, key: str = "datasets") -> Collection:
    """Load topics, qrels and a corpus from separate files (no qrels, empty qrels, for ``qrels=None``)."""
    ids, titles, texts = read_corpus(require_file(corpus, "corpus", f"{key}.corpus"))
    qids, qtexts = read_topics(require_file(topics, "topics", f"{key}.topics"))
    return Collection(
        corpus=corpus_frame(ids, texts, titles),
        queries=queries_frame(qids, qtexts),
        qrels=qrels_frame(*read_qrels(require_file(qrels, "qrels", f"{key}.qrels"))) if qrels else qrels_frame(),
    )
