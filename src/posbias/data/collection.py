"""A test collection in memory, and the checks every loader's output passes before it is written."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from posbias.errors import PosbiasError

log = logging.getLogger(__name__)


@dataclass
class Collection:
    """Corpus, queries and qrels as polars frames with the columns of :mod:`posbias.schemas`.

    ``runs`` holds first-stage runs that came with the data (imported candidate lists), keyed by
    retriever name (``imported:<name>``); ``listwise`` holds training instances where the source has
    them (teacher permutations of candidate lists).
    """

    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    runs: dict[str, pl.DataFrame] = field(default_factory=dict)
    listwise: pl.DataFrame | None = None


def corpus_frame(doc_ids: list[str], texts: list[str], titles: list[str] | None = None) -> pl.DataFrame:
    """Build a corpus frame with string ids and an empty title where the source has none."""
    return pl.DataFrame(
        {
            "doc_id": [str(d) for d in doc_ids],
            "title": titles if titles is not None else [""] * len(doc_ids),
            "text": texts,
        },
        schema={"doc_id": pl.String, "title": pl.String, "text": pl.String},
    )


def qrels_frame(query_ids: Sequence = (), doc_ids: Sequence = (), relevance: Sequence[int] = ()) -> pl.DataFrame:
    """Judgements in schema QRELS; no arguments give none (a loader asked not to read its qrels file)."""
    return pl.DataFrame(
        {"query_id": [str(q) for q in query_ids], "doc_id": [str(d) for d in doc_ids], "relevance": list(relevance)},
        schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32},
    )


def queries_frame(query_ids: list, texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"query_id": [str(q) for q in query_ids], "text": texts},
        schema={"query_id": pl.String, "text": pl.String},
    )


def passage_texts(corpus: pl.DataFrame, doc_ids: pl.Series | None = None) -> dict[str, str]:
    """doc id -> "title text": what rerankers and indexes read as a passage; only those of ``doc_ids`` if given
    (a training corpus holds 256,000 passages, and a job that reads a few thousand need not build them all)."""
    if doc_ids is not None:
        corpus = corpus.join(doc_ids.unique().to_frame("doc_id"), on="doc_id", how="semi")
    return {d: f"{t} {x}".strip() for d, t, x in corpus.select("doc_id", "title", "text").iter_rows()}


def relevance_threshold(configured: int, top_grade: int | None) -> int:
    """The grade from which a passage counts as relevant in a collection whose qrels top out at
    ``top_grade``: 1 for binary qrels (BEIR's 0/1), so they have relevant passages under a threshold set for
    graded ones (TREC DL's 0–3, where 2 is "relevant"); else the configured grade
    (``datasets.<name>.relevant_grade``, else ``reranking.relevant_grade``), which a graded collection must
    reach (a position order refuses a grade above its qrels'). The papers are silent (docs/fidelity.md)."""
    return 1 if top_grade == 1 else configured


def top_grade(qrels: pl.DataFrame) -> int | None:
    """The highest grade in ``qrels``, None for none."""
    return None if qrels.is_empty() else int(qrels["relevance"].max())


def grades_by_query(qrels: pl.DataFrame) -> dict[str, dict[str, int]]:
    """query id -> {doc id: grade}."""
    grades: dict[str, dict[str, int]] = {}
    for q, d, g in qrels.select("query_id", "doc_id", "relevance").iter_rows():
        grades.setdefault(q, {})[d] = g
    return grades


def check(coll: Collection, source: str) -> Collection:
    """Reject unusable collections; warn about and drop qrels for unknown queries (an error when no
    judged query is known, or no document judged relevant is in the corpus: the qrels and the topics or
    the corpus are from different collections).

    ``source`` names where the data came from (a file or a dataset id) so messages can point at it.
    """
    if coll.corpus.height == 0:
        raise PosbiasError(f"{source}: the corpus is empty; check the corpus file or dataset id")
    dups = coll.corpus.group_by("doc_id", maintain_order=True).len().filter(pl.col("len") > 1)
    if dups.height:
        examples = ", ".join(dups["doc_id"].head(3).to_list())
        raise PosbiasError(
            f"{source}: {dups.height} doc ids occur more than once in the corpus (e.g. {examples}); "
            "doc ids must be unique: deduplicate the corpus file"
        )
    nul = coll.corpus.filter(pl.any_horizontal(pl.col(c).str.contains("\x00", literal=True)
                                               for c in ("text", "title") if c in coll.corpus.columns))
    if nul.height:  # a NUL is a corrupt byte, not text: tokenizers and prompts would carry it silently
        raise PosbiasError(f"{source}: a NUL byte in {nul.height} passage(s) (e.g. doc {nul['doc_id'][0]!r}); "
                           "the corpus file is corrupt there: remove the NUL bytes (e.g. tr -d '\\000')")
    dup_q = coll.queries.group_by("query_id", maintain_order=True).len().filter(pl.col("len") > 1)
    if dup_q.height:
        raise PosbiasError(
            f"{source}: {dup_q.height} query ids occur more than once (e.g. {dup_q['query_id'][0]}); "
            "query ids must be unique"
        )
    coll.qrels = check_qrels(coll.qrels, coll.queries, coll.corpus, source)
    return coll


def check_qrels(qrels: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, source: str) -> pl.DataFrame:
    """The qrels of a collection's queries (those of unknown queries dropped, with a warning), one
    judgement per (query, doc); PosbiasError when no judged query is a query or no document judged
    relevant is in the corpus. No qrels (a training set without judgements) pass as they are."""
    if qrels.height == 0:
        return qrels
    known = set(queries["query_id"].to_list())
    unknown = qrels.filter(~pl.col("query_id").is_in(known))
    if unknown.height and unknown.height == qrels.height:
        raise PosbiasError(
            f"{source}: no query judged in the qrels is among the {len(known)} queries (e.g. qrels query "
            f"{unknown['query_id'][0]!r}, query {sorted(known)[0] if known else None!r}); the qrels and the "
            "topics do not belong together"
        )
    if unknown.height:
        n_queries = unknown["query_id"].n_unique()
        log.warning(
            "%s: qrels name %d queries (%d judgements) that are not among the queries; they are dropped",
            source,
            n_queries,
            unknown.height,
        )
        qrels = qrels.filter(pl.col("query_id").is_in(known))
    judged_docs = qrels.filter(pl.col("relevance") > 0)["doc_id"].unique(maintain_order=True)
    if judged_docs.len() and not judged_docs.is_in(corpus["doc_id"].implode()).any():
        raise PosbiasError(
            f"{source}: none of the {judged_docs.len()} doc ids the qrels judge relevant is in the corpus (e.g. qrels "
            f"doc {judged_docs[0]!r}, corpus doc {corpus['doc_id'][0]!r}), so every measure would be 0; the "
            "qrels and the corpus do not belong together, or their doc ids are written differently"
        )
    return qrels.unique(["query_id", "doc_id"], keep="last", maintain_order=True)
