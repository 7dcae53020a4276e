"""The embedded synthetic collection: topical documents, graded qrels and teacher orderings.

It is what the default workflow runs on, so it needs no download and is generated
deterministically from a seed. The generative story:

- a vocabulary of pronounceable pseudo-words; the most frequent ones form a Zipf-distributed
  background, the rest are split into topic words and, within each topic, subtopic words;
- each document belongs to one (topic, subtopic), has a *focus* (high or low), and mixes background,
  topic and subtopic words (a high-focus document uses more subtopic words), with some words from
  a random other topic as noise; each document sees only a random part of its subtopic's words,
  so queries and relevant documents do not always share terms;
- each query is about one subtopic and uses two to four of its topic and subtopic words;
- graded relevance: 3 = same subtopic, high focus; 2 = same subtopic, low focus; 1 = same topic,
  other subtopic; 0 = a judged sample of documents from other topics.

Queries are split into ``test`` and ``train`` from one query stream, so the two splits share the
corpus. Each training query also gets a listwise instance: 20 candidates ordered by a noisy term
overlap score (a cheap first stage) and a teacher ranking by grade, ties broken by that score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from posbias.config import entry_defaults, schema
from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "kr", "pl"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]


_D = entry_defaults("datasets", "source", "synthetic")  # the defaults of the config keys are the schema's
_ROOT_SEED = schema()["properties"]["seed"]["default"]


@dataclass(frozen=True)
class SyntheticSpec:
    """Sizes and mixture weights of the synthetic collection (see config/schema.yaml)."""

    seed: int = _ROOT_SEED
    n_docs: int = _D["n_docs"]
    n_topics: int = _D["n_topics"]
    n_subtopics: int = _D["n_subtopics"]
    n_test_queries: int = _D["n_test_queries"]
    n_train_queries: int = _D["n_train_queries"]
    n_candidates: int = _D["n_candidates"]
    doc_length: tuple[int, int] = tuple(_D["doc_length"])
    background_words: int = 1500
    topic_words: int = 20
    subtopic_words: int = 12


def _vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.integers(2, 4)
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)))
    return sorted(words)


def generate(spec: SyntheticSpec, split: str) -> Collection:
    """Generate the collection; ``split`` is ``test`` or ``train`` (the corpus is the same for both)."""
    rng = np.random.default_rng(spec.seed)
    n_topic_vocab = spec.n_topics * (spec.topic_words + spec.n_subtopics * spec.subtopic_words)
    vocab = np.array(_vocabulary(spec.background_words + n_topic_vocab, rng))
    vocab = vocab[rng.permutation(len(vocab))]
    background = vocab[: spec.background_words]
    zipf = 1.0 / np.arange(1, spec.background_words + 1) ** 1.05
    zipf /= zipf.sum()
    rest = vocab[spec.background_words :].reshape(spec.n_topics, -1)
    topic_vocab = rest[:, : spec.topic_words]
    sub_vocab = rest[:, spec.topic_words :].reshape(spec.n_topics, spec.n_subtopics, spec.subtopic_words)

    doc_topic = rng.integers(0, spec.n_topics, spec.n_docs)
    doc_sub = rng.integers(0, spec.n_subtopics, spec.n_docs)
    doc_focus = rng.random(spec.n_docs) < 0.4
    doc_ids = [f"d{i:05d}" for i in range(spec.n_docs)]
    titles, texts = [], []
    for i in range(spec.n_docs):
        t, s = doc_topic[i], doc_sub[i]
        p_sub = 0.22 if doc_focus[i] else 0.08
        probs = np.array([0.62 - p_sub / 2, 0.28 - p_sub / 2, p_sub, 0.10])
        probs /= probs.sum()
        seen_sub = sub_vocab[t, s][rng.random(spec.subtopic_words) < 0.6]
        if len(seen_sub) == 0:
            seen_sub = sub_vocab[t, s][:1]
        other = topic_vocab[(t + rng.integers(1, spec.n_topics)) % spec.n_topics]
        length = rng.integers(spec.doc_length[0], spec.doc_length[1] + 1)
        kinds = rng.choice(4, size=length, p=probs)
        words = np.where(
            kinds == 0,
            rng.choice(background, size=length, p=zipf),
            np.where(
                kinds == 1,
                rng.choice(topic_vocab[t], size=length),
                np.where(kinds == 2, rng.choice(seen_sub, size=length), rng.choice(other, size=length)),
            ),
        )
        texts.append(" ".join(words))
        titles.append(" ".join(rng.choice(np.concatenate([topic_vocab[t], seen_sub]), size=3, replace=False)))

    # One query stream; the first n_test queries are the test split, the rest train.
    n_queries = spec.n_test_queries + spec.n_train_queries
    q_topic = rng.integers(0, spec.n_topics, n_queries)
    q_sub = rng.integers(0, spec.n_subtopics, n_queries)
    q_texts = []
    for j in range(n_queries):
        n_sub = rng.integers(1, 3)
        n_top = rng.integers(1, 3)
        words = list(rng.choice(sub_vocab[q_topic[j], q_sub[j]], n_sub, replace=False))
        words += list(rng.choice(topic_vocab[q_topic[j]], n_top, replace=False))
        rng.shuffle(words)
        q_texts.append(" ".join(words))
    selected = range(spec.n_test_queries) if split == "test" else range(spec.n_test_queries, n_queries)
    qids = [f"{split}-{j:04d}" for j in selected]

    rq, rd, rel = [], [], []
    listwise_rows: list[dict] = []
    doc_words = [set(f"{a} {b}".split()) for a, b in zip(titles, texts)]
    for qid, j in zip(qids, selected):
        same_topic = doc_topic == q_topic[j]
        grades = np.where(same_topic & (doc_sub == q_sub[j]), np.where(doc_focus, 3, 2), np.where(same_topic, 1, 0))
        judged = np.flatnonzero(grades > 0)
        negatives = rng.choice(np.flatnonzero(grades == 0), size=min(10, int((grades == 0).sum())), replace=False)
        for d in np.concatenate([judged, np.sort(negatives)]):
            rq.append(qid)
            rd.append(doc_ids[d])
            rel.append(int(grades[d]))
        if split == "train":
            listwise_rows.append(_listwise(qid, q_texts[j], grades, doc_words, doc_ids, texts, spec, rng))

    coll = Collection(
        corpus=corpus_frame(doc_ids, texts, titles),
        queries=queries_frame(qids, [q_texts[j] for j in selected]),
        qrels=qrels_frame(rq, rd, rel),
    )
    if listwise_rows:
        coll.listwise = pl.DataFrame(listwise_rows)
    return coll


def _listwise(qid, query, grades, doc_words, doc_ids, texts, spec, rng) -> dict:
    """A listwise instance: noisy-overlap candidates in input order, teacher ranking by grade."""
    terms = set(query.split())
    overlap = np.array([len(terms & words) for words in doc_words], dtype=float)
    first_stage = overlap + rng.normal(0.0, 0.5, len(overlap))
    candidates = np.argsort(-first_stage, kind="stable")[: spec.n_candidates]
    teacher = sorted(candidates, key=lambda d: (-grades[d], -first_stage[d]))
    return {
        "query_id": qid,
        "query": query,
        "doc_ids": [doc_ids[d] for d in candidates],
        "texts": [texts[d] for d in candidates],
        "teacher_ranking": [doc_ids[d] for d in teacher],
    }
