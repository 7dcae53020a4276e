"""Lucene indexes through pyserini: BM25 over text and impact search over SPLADE vectors.

Indexes are built by Anserini's ``IndexCollection`` from a JSONL folder (the same code path as
``python -m pyserini.index.lucene``) into a temporary folder that is renamed when complete. BM25
follows Anserini's BEIR "flat" conventions: title and text joined as ``contents``, k1 = 0.9,
b = 0.4.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from posbias.errors import PosbiasError
from posbias.retrieval.java import start_jvm
from posbias.retrieval.kinds import RetrievalJob
from posbias.runs import canonical

log = logging.getLogger(__name__)


def _index_collection(records: Iterable[dict], out_dir: Path, collection: str, threads: int, extra: list[str]) -> None:
    start_jvm()
    from jnius import autoclass

    out_dir = Path(out_dir)
    tmp_index = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp_index, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="posbias-jsonl-") as jsonl_dir:
        with open(Path(jsonl_dir) / "docs.jsonl", "w") as out:
            for rec in records:
                out.write(json.dumps(rec) + "\n")
        args = ["-collection", collection, "-input", jsonl_dir, "-index", str(tmp_index),
                "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads), *extra]
        log.info("IndexCollection %s", " ".join(args))
        autoclass("io.anserini.index.IndexCollection").main(args)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp_index.rename(out_dir)


def build_bm25_index(corpus: pl.DataFrame, out_dir: Path, threads: int) -> None:
    """Index ``title + " " + text`` as ``contents`` (BEIR flat), storing raw docs for inspection."""
    records = (
        {"id": did, "contents": f"{title} {text}".strip()}
        for did, title, text in corpus.select("doc_id", "title", "text").iter_rows()
    )
    _index_collection(records, out_dir, "JsonCollection", threads, ["-storeRaw"])


def build_impact_index(vectors: Iterable[tuple[str, dict[str, int]]], out_dir: Path, threads: int) -> None:
    """Index pre-quantised term weights (SPLADE) as an impact index."""
    records = ({"id": did, "contents": "", "vector": vec} for did, vec in vectors)
    _index_collection(records, out_dir, "JsonVectorCollection", threads, ["-impact", "-pretokenized"])


def _hits_to_run(results: dict, qids: list[str], depth: int) -> tuple[pl.DataFrame, list[str]]:
    rows: dict[str, list] = {"query_id": [], "doc_id": [], "score": []}
    for qid in qids:
        for hit in results.get(qid, []):
            rows["query_id"].append(qid)
            rows["doc_id"].append(hit.docid)
            rows["score"].append(float(hit.score))
    run = canonical(pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64}), depth)
    empty = sorted(set(qids) - set(run["query_id"].to_list()))
    return run, empty


def open_searcher(cls, index: Path | str, *args):
    """A pyserini searcher of ``cls`` over the workflow's index folder (a Path) or a pyserini prebuilt
    index (its name, a str; downloaded once into pyserini's cache)."""
    if isinstance(index, Path):
        return cls(str(index), *args)
    try:
        searcher = cls.from_prebuilt_index(index, *args)  # pyserini prints and returns None for unknown names
    except ValueError as exc:
        raise PosbiasError(f"pyserini prebuilt index {index!r}: {exc}") from None
    if searcher is None:  # the job names the key (workflow/scripts/retrieve.py)
        raise PosbiasError(_prebuilt_failure(index, cls.__name__))
    return searcher


def _prebuilt_failure(index: str, searcher: str) -> str:
    """Why pyserini gave no searcher for ``index``: a name it does not know, or one it could not download
    (no network on this node), with the command that fetches it where there is network."""
    from pyserini import prebuilt_index_info as info
    from pyserini.util import get_cache_home

    known = {**info.TF_INDEX_INFO, **info.IMPACT_INDEX_INFO, **info.FAISS_INDEX_INFO,
             **info.LUCENE_HNSW_INDEX_INFO, **info.LUCENE_FLAT_INDEX_INFO}
    if index not in known:
        return f"{index!r} is not a pyserini prebuilt index of {searcher}; see pyserini's prebuilt index list"
    return (f"{index!r} is not in pyserini's cache ({get_cache_home()}) and could not be downloaded from this "
            f"node; fetch it on a login node with `python -c \"from pyserini.search.lucene import LuceneSearcher; "
            f"LuceneSearcher.from_prebuilt_index('{index}')\"` (the same PYSERINI_CACHE)")


def search_bm25(index_dir: Path | str, queries: pl.DataFrame, depth: int, k1: float, b: float, threads: int):
    """BM25 search; returns (canonical run, ids of queries with no hits)."""
    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = open_searcher(LuceneSearcher, index_dir)
    searcher.set_bm25(k1, b)
    qids, texts = queries["query_id"].to_list(), queries["text"].to_list()
    results = searcher.batch_search(texts, qids, k=depth, threads=threads)
    return _hits_to_run(results, qids, depth)


def search_impact(index_dir: Path | str, queries: pl.DataFrame, depth: int, encoder, threads: int):
    """Impact search with a pyserini query encoder; returns (run, ids of queries with no hits)."""
    start_jvm()
    from pyserini.search.lucene import LuceneImpactSearcher

    searcher = open_searcher(LuceneImpactSearcher, index_dir, encoder)
    qids, texts = queries["query_id"].to_list(), queries["text"].to_list()
    results = searcher.batch_search(texts, qids, k=depth, threads=threads)
    return _hits_to_run(results, qids, depth)


def index_job(job: RetrievalJob, out: Path) -> None:
    """Kind ``bm25``'s index (:mod:`posbias.retrieval.kinds`)."""
    build_bm25_index(job.data["corpus"], out, job.threads)


def search_job(job: RetrievalJob):
    """Kind ``bm25``'s search: the built index or a prebuilt one, with the entry's k1 and b."""
    return search_bm25(job.index, job.data["queries"], job.spec["depth"], job.spec["k1"], job.spec["b"], job.threads)
