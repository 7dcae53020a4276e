"""Learned sparse retrieval (SPLADE) through pyserini: a masked-LM encoder and a Lucene impact index.

Documents are encoded with pyserini's ``SpladeDocumentEncoder`` (max-pooled ``log(1 + relu)`` of the
MLM logits, quantised the way pyserini's query side expects) and indexed as pre-tokenised impacts;
queries are encoded by ``SpladeQueryEncoder`` inside ``LuceneImpactSearcher``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
from tqdm import tqdm

from posbias.retrieval import lucene
from posbias.retrieval.java import start_jvm
from posbias.retrieval.kinds import RetrievalJob


def _encode(corpus: pl.DataFrame, model: str, batch_size: int, max_length: int, device: str) -> Iterator:
    start_jvm()
    from pyserini.encode import SpladeDocumentEncoder

    encoder = SpladeDocumentEncoder(model, device=device)
    ids = corpus["doc_id"].to_list()
    titles, texts = corpus["title"].to_list(), corpus["text"].to_list()
    for start in tqdm(range(0, len(ids), batch_size), desc="SPLADE encoding", unit="batch", mininterval=5):
        end = start + batch_size
        weights = encoder.encode(texts[start:end], titles=titles[start:end], max_length=max_length)
        for did, vec in zip(ids[start:end], weights):
            yield did, {term: int(w) for term, w in vec.items() if int(w) > 0}


def build_index(corpus: pl.DataFrame, out_dir: Path, model: str, batch_size: int, max_length: int,
                device: str, threads: int) -> None:
    lucene.build_impact_index(_encode(corpus, model, batch_size, max_length, device), out_dir, threads)


def search(index_dir: Path | str, queries: pl.DataFrame, depth: int, model: str, device: str, threads: int):
    start_jvm()
    from pyserini.encode import SpladeQueryEncoder

    return lucene.search_impact(index_dir, queries, depth, SpladeQueryEncoder(model, device=device), threads)


def index_job(job: RetrievalJob, out: Path) -> None:
    """Kind ``splade``'s index (:mod:`posbias.retrieval.kinds`)."""
    build_index(job.data["corpus"], out, job.model, job.spec["batch_size"], job.spec["max_length"], job.device,
                job.threads)


def search_job(job: RetrievalJob):
    """Kind ``splade``'s search (:mod:`posbias.retrieval.kinds`)."""
    return search(job.index, job.data["queries"], job.spec["depth"], job.model, job.device, job.threads)
