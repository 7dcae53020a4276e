"""Collections from ir_datasets ids (``cranfield``, ``msmarco-passage/trec-dl-2019/judged``, …).

Offline, ir_datasets uses a file already at its cache path as is and otherwise tries to download it.
That failure is turned into one line naming the dataset, the missing file and the cache path to put
it at (see ``../shared/data/SOURCES.md`` for priming a cache from local copies).
"""

from __future__ import annotations

import os
from pathlib import Path

from tqdm import tqdm

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError


def _missing_cache_file(exc: BaseException) -> str | None:
    """The cache path ir_datasets was trying to fill when ``exc`` was raised, if any."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if type(owner).__name__ == "Cache" and hasattr(owner, "_path"):
            found = str(owner._path)
        elif found is None and type(owner).__name__ == "Download" and getattr(owner, "_cache_path", None):
            found = str(owner._cache_path)
        tb = tb.tb_next
    return found


def load(dataset_id: str, home: str | None = None) -> Collection:
    """Load docs, queries and qrels of an ir_datasets id, optionally from cache root ``home``."""
    if home:
        os.environ["IR_DATASETS_HOME"] = str(Path(home).expanduser())
    import ir_datasets

    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise PosbiasError(
            f"datasets: ir_datasets id {dataset_id!r} does not exist; see https://ir-datasets.com for the ids "
            "(e.g. 'cranfield', 'msmarco-passage/trec-dl-2019/judged', 'beir/scifact/test')"
        ) from None
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
        missing = _missing_cache_file(exc)
        root = os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets")
        if missing:
            raise PosbiasError(
                f"datasets: {dataset_id!r} is not in the ir_datasets cache ({root}) and cannot be downloaded "
                f"({type(exc).__name__}); put the file at {missing} (see ../shared/data/SOURCES.md)"
            ) from None
        raise PosbiasError(f"datasets: loading ir_datasets id {dataset_id!r} failed: {exc}") from exc
    return Collection(
        corpus=corpus_frame(doc_ids, texts, titles),
        queries=queries_frame(qids, qtexts),
        qrels=qrels_frame(rq, rd, rel),
    )
