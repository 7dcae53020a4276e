"""Dense retrieval: an HF encoder through pyserini's encoders, exact inner-product search in faiss.

The corpus is encoded in batches (``title text`` as one string, like the BM25 contents) into a flat
inner-product faiss index saved as pyserini expects (``index`` + ``docid`` in one folder), and
searched with pyserini's ``FaissSearcher``. Pooling (``mean`` for Contriever, ``cls`` for others)
and L2 normalisation are per-model settings in the config.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
from tqdm import tqdm

from posbias.retrieval import lucene
from posbias.retrieval.java import start_jvm
from posbias.retrieval.kinds import RetrievalJob
from posbias.retrieval.lucene import _hits_to_run


def build_index(corpus: pl.DataFrame, out_dir: Path, model: str, pooling: str, l2_norm: bool,
                batch_size: int, max_length: int, device: str) -> None:
    """Encode the corpus and write a flat inner-product faiss index (atomically)."""
    start_jvm()  # pyserini.encode pulls in its Lucene classes
    import faiss
    from pyserini.encode import AutoDocumentEncoder

    encoder = AutoDocumentEncoder(model, device=device, pooling=pooling, l2_norm=l2_norm)
    ids = corpus["doc_id"].to_list()
    titles, texts = corpus["title"].to_list(), corpus["text"].to_list()
    chunks = []
    for start in tqdm(range(0, len(ids), batch_size), desc="encoding corpus", unit="batch", mininterval=5):
        end = start + batch_size
        chunks.append(encoder.encode(texts[start:end], titles=titles[start:end], max_length=max_length))
    vectors = np.ascontiguousarray(np.vstack(chunks), dtype=np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    faiss.write_index(index, str(tmp / "index"))
    (tmp / "docid").write_text("".join(f"{d}\n" for d in ids))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def search(index_dir: Path | str, queries: pl.DataFrame, depth: int, model: str, pooling: str, l2_norm: bool,
           max_length: int, device: str, threads: int):
    """Exact inner-product search; returns (canonical run, ids of queries with no hits)."""
    start_jvm()
    from pyserini.encode import AutoQueryEncoder
    from pyserini.search.faiss import FaissSearcher

    encoder = AutoQueryEncoder(model, device=device, pooling=pooling, l2_norm=l2_norm)
    searcher = lucene.open_searcher(FaissSearcher, index_dir, encoder)
    qids, texts = queries["query_id"].to_list(), queries["text"].to_list()
    vectors = np.vstack([encoder.encode(t, max_length=max_length) for t in tqdm(texts, desc="encoding queries", mininterval=5)])
    results = searcher.batch_search(vectors, qids, k=min(depth, searcher.num_docs), threads=threads)
    return _hits_to_run(results, qids, depth)


def index_job(job: RetrievalJob, out: Path) -> None:
    """Kind ``dense``'s index (:mod:`posbias.retrieval.kinds`)."""
    spec = job.spec
    build_index(job.data["corpus"], out, job.model, spec["pooling"], spec["l2_norm"], spec["batch_size"],
                spec["max_length"], job.device)


def search_job(job: RetrievalJob):
    """Kind ``dense``'s search (:mod:`posbias.retrieval.kinds`)."""
    spec = job.spec
    return search(job.index, job.data["queries"], spec["depth"], job.model, spec["pooling"], spec["l2_norm"],
                  spec["max_length"], job.device, job.threads)
