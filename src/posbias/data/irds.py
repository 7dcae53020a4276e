"""Collections from ir_datasets ids (``cranfield``, ``msmarco-passage/trec-dl-2019/judged``, …).

Offline, ir_datasets uses a file already at its cache path as is and otherwise tries to download it.
That failure is turned into one line naming the dataset, the missing file and the cache path to put
it at (see ``../shared/data/SOURCES.md`` for priming a cache from local copies).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tqdm import tqdm

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError


def _missing_cache_file(exc: BaseException) -> str | None:
    """The file ir_datasets was trying to download when ``exc`` was raised, if any.

    ir_datasets does not expose it, so the traceback is searched: the innermost ``Download`` frame
    holds the raw file's cache path (e.g. ``cranfield/cran.tar.gz``); failing that, the ``Cache``
    frame holds the derived file's path.
    """
    download = cache = None
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if type(owner).__name__ == "Download" and getattr(owner, "_cache_path", None):
            download = str(owner._cache_path)
        elif type(owner).__name__ == "Cache" and cache is None and hasattr(owner, "_path"):
            cache = str(owner._path)
        tb = tb.tb_next
    return download or cache


def _open(dataset_id: str, home: str | None):
    """The ir_datasets dataset of ``dataset_id``, with cache root ``home`` if given."""
    if home:
        home = str(Path(home).expanduser().resolve())
        if "ir_datasets" in sys.modules and os.environ.get("IR_DATASETS_HOME") != home:
            # ir_datasets fixes its cache paths at import time; a second home needs a new process.
            raise RuntimeError(f"ir_datasets was already imported with another cache root than {home}")
        os.environ["IR_DATASETS_HOME"] = home
    import ir_datasets

    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise PosbiasError(
            f"datasets: ir_datasets id {dataset_id!r} does not exist; see https://ir-datasets.com for the ids "
            "(e.g. 'cranfield', 'msmarco-passage/trec-dl-2019/judged', 'beir/scifact/test')"
        ) from None


def _failure(exc: Exception, dataset_id: str) -> PosbiasError:
    """One line for a failure while reading ``dataset_id``: the cache file to provide, if that is it."""
    missing = _missing_cache_file(exc)
    root = os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets")
    if missing:
        return PosbiasError(
            f"datasets: {dataset_id!r} is not in the ir_datasets cache ({root}) and cannot be downloaded "
            f"({type(exc).__name__}); fetch it on a login node with `snakemake --cores 4 data` (the same "
            f"IR_DATASETS_HOME), or put the file at {missing} (see ../shared/data/SOURCES.md)")
    return PosbiasError(f"datasets: loading ir_datasets id {dataset_id!r} failed: {exc}")


def queries(dataset_id: str, home: str | None = None) -> list:
    """The query records of an ir_datasets id as it gives them (with every field it has, e.g. the
    ``answers`` of open-domain QA ids)."""
    ds = _open(dataset_id, home)
    if not ds.has_queries():
        raise PosbiasError(f"datasets: ir_datasets id {dataset_id!r} has no queries")
    try:
        return list(ds.queries_iter())
    except Exception as exc:
        raise _failure(exc, dataset_id) from exc


def load(dataset_id: str, home: str | None = None) -> Collection:
    """Load docs, queries and qrels of an ir_datasets id, optionally from cache root ``home``."""
    ds = _open(dataset_id, home)
    for part in ("docs", "queries", "qrels"):
        if not getattr(ds, f"has_{part}")():
            raise PosbiasError(f"datasets: ir_datasets id {dataset_id!r} has no {part}; use an id that has all three")
    try:
        doc_ids, titles, texts = [], [], []
        for doc in tqdm(ds.docs_iter(), total=ds.docs_count(), desc=f"{dataset_id} docs", mininterval=5):
            doc_ids.append(doc.doc_id)
            titles.append(getattr(doc, "title", "") or "")
            texts.append(getattr(doc, "text", None) or doc.default_text())
        qids, qtexts = [], []
        for query in ds.queries_iter():
            qids.append(query.query_id)
            qtexts.append(getattr(query, "text", None) or query.default_text())
        rq, rd, rel = [], [], []
        for qrel in ds.qrels_iter():
            rq.append(qrel.query_id)
            rd.append(qrel.doc_id)
            rel.append(int(qrel.relevance))
    except PosbiasError:
        raise
    except Exception as exc:
        raise _failure(exc, dataset_id) from exc
    return Collection(
        corpus=corpus_frame(doc_ids, texts, titles),
        queries=queries_frame(qids, qtexts),
        qrels=qrels_frame(rq, rd, rel),
    )
