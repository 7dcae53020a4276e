"""The toy positional-bias task of the default run: a reranking task a random-initialised tiny LM
learns in CPU-minutes, so that the position effect and its removal can be shown end to end.

Design (measured in ``shared/notes/tiny-model-training.md``; the query-dependent variants did not
learn within the budget):

- a closed vocabulary of pseudo-words ``w0 … w{vocab-1}``; the first ``keys`` are *key* words;
- each query has ``n_candidates`` passages of ``passage_words`` words; a passage's grade is its
  number of key words: one passage of grade 2, ``runners_up`` of grade 1, the rest 0;
- the query is ``query_words`` non-key words: it is shown but relevance does not depend on it
  (a tiny model does not learn query–passage matching in CPU-minutes; it does learn to spot keys);
- every candidate is judged (qrels hold all grades, 0 included), so the ``oracle`` retriever
  (grade + seeded noise, :mod:`posbias.retrieval.oracle`) is the task's biased first stage;
- the ``train`` split also carries listwise instances: candidates in that same biased order
  (``first_stage_noise``), and the teacher ranking by grade, ties kept in first-stage order (as
  the synthetic collection's teacher does, and as a listwise teacher shown a biased list tends to).

Doc ids are ``<query id>-<index>`` in generation order, which is random with respect to grade.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from posbias.config import entry_defaults, schema
from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.permute import derive_seed
from posbias.retrieval.oracle import noisy_order


_D = entry_defaults("datasets", "source", "toy")  # the defaults are the schema's
_ROOT_SEED = schema()["properties"]["seed"]["default"]


@dataclass(frozen=True)
class ToySpec:
    """Sizes of the toy task (see config/schema.yaml, ``source: toy``)."""

    seed: int = _ROOT_SEED
    n_test_queries: int = _D["n_test_queries"]
    n_train_queries: int = _D["n_train_queries"]
    n_candidates: int = _D["n_candidates"]
    runners_up: int = _D["runners_up"]
    vocab: int = _D["vocab"]
    keys: int = _D["keys"]
    passage_words: int = _D["passage_words"]
    query_words: int = _D["query_words"]
    first_stage_noise: float = _D["first_stage_noise"]

    def __post_init__(self) -> None:
        if not 2 <= self.passage_words or self.keys < 2 or self.vocab - self.keys < max(self.passage_words, self.query_words):
            raise ValueError("toy task: needs passage_words >= 2, keys >= 2 and more non-key words than a passage "
                             f"or a query has (got vocab {self.vocab}, keys {self.keys})")
        if self.runners_up + 1 > self.n_candidates:
            raise ValueError(f"toy task: {self.runners_up} runners-up + 1 best passage exceed {self.n_candidates} candidates")


def grades(spec: ToySpec) -> np.ndarray:
    """The grades of one query's candidates, in generation order before the per-query shuffle."""
    return np.array([2] + [1] * spec.runners_up + [0] * (spec.n_candidates - spec.runners_up - 1))


def generate(spec: ToySpec, split: str) -> Collection:
    """The ``test``, ``dev`` or ``train`` split (disjoint queries and passages, all from ``spec.seed``;
    ``dev`` has as many queries as ``test``: held-out data to choose settings on)."""
    if split not in ("test", "dev", "train"):
        raise ValueError(f"toy task: split {split!r}; use test, dev or train")
    if split == "train" and spec.n_candidates > 20:
        raise ValueError(f"toy task: the train split's listwise instances hold every candidate, at most 20 "
                         f"identifiers [A] … [T] (got n_candidates {spec.n_candidates})")
    rng = np.random.default_rng(derive_seed(spec.seed, "toy", split))
    words = np.array([f"w{i}" for i in range(spec.vocab)])
    keys, fillers = words[: spec.keys], words[spec.keys:]
    n = spec.n_train_queries if split == "train" else spec.n_test_queries
    doc_ids, texts, qids, qtexts, rq, rd, rel, listwise = [], [], [], [], [], [], [], []
    for j in range(n):
        qid = f"toy-{split}-{j:05d}"
        qids.append(qid)
        qtexts.append(" ".join(rng.choice(fillers, spec.query_words, replace=False)))
        g = grades(spec)[rng.permutation(spec.n_candidates)]
        ids = [f"{qid}-{i:02d}" for i in range(spec.n_candidates)]
        passages = []
        for grade in g:
            chosen = list(rng.choice(keys, grade, replace=False)) + list(
                rng.choice(fillers, spec.passage_words - grade, replace=False))
            passages.append(" ".join(rng.permutation(chosen)))
        doc_ids += ids
        texts += passages
        rq += [qid] * spec.n_candidates
        rd += ids
        rel += [int(x) for x in g]
        if split == "train":
            order = noisy_order(g, spec.first_stage_noise, spec.seed, qid)
            position = {i: p for p, i in enumerate(order)}
            teacher = sorted(range(spec.n_candidates), key=lambda i: (-g[i], position[i]))
            listwise.append({"query_id": qid, "query": qtexts[-1], "doc_ids": [ids[i] for i in order],
                             "texts": [passages[i] for i in order], "teacher_ranking": [ids[i] for i in teacher]})
    coll = Collection(corpus=corpus_frame(doc_ids, texts), queries=queries_frame(qids, qtexts),
                      qrels=qrels_frame(rq, rd, rel))
    if listwise:
        coll.listwise = pl.DataFrame(listwise)
    return coll
