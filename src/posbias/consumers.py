"""The consumers of a pointwise scorer: the one registry of what decision each downstream use takes
from a query's scored candidates, and how that decision's stability is measured (OC-SFT).

A dataset says which consumer reads its scores (``datasets.<name>.consumer``); every place that needs
to know about consumers (the config checks, the scoring window, the ``decisions`` rule, the
consumers table) asks this registry. To add a consumer: its decision step and one :class:`Consumer` line
here, and its name in config/schema.yaml's ``consumer`` enum (and a ``consumers.<name>`` block if it has
settings, e.g. its own Grades window).

- ``passage_reranking``: the ranking itself; its stability is :mod:`posbias.stability`'s (τ-PSI,
  retention Jaccard, BSC@K), so it has no extra decisions.
- ``multidoc_qa``: the retention set (documents scoring ≥ τ*, the threshold F1-tuned on the
  canonical order as for retention Jaccard) goes to a frozen reader (:mod:`posbias.readers`); the
  decisions are its answer and the verdict (correct or not). The retained passages reach the reader
  in one fixed order per query (by canonical score), so only the set can change its answer.
- ``response_ranking``: the preference pair each presentation gives (the top-scored response chosen,
  the bottom-scored rejected: the pair a preference-training set would take) and the response ranked
  first (nDCG@1, selection).

A flip rate is modal (:func:`posbias.metrics.modal_flip`): 1 − the share of the M presentations whose
decision is the most frequent one, averaged over instances.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from posbias import metrics


@dataclass(frozen=True)
class Consumer:
    """One downstream use of the scores: its label, whether it needs a reader (and gold answers), what
    its ``quality`` / ``flip`` / ``verdict_flip`` / ``retained`` columns mean (as the consumers table prints
    them), whether its datasets get position orders, and its decision step ``decisions(inputs:
    DecisionInputs) -> (per-query rows, per-presentation rows)`` (None: no decisions beyond the ranking)."""

    name: str
    label: str
    reader: bool = False
    columns: dict[str, str] = field(default_factory=dict)
    positions: bool = False  # its datasets are also reranked in position orders (the others over shuffles only)
    decisions: Callable[[DecisionInputs], tuple[list[dict], list[dict]]] | None = None


@dataclass
class DecisionInputs:
    """What a consumer's decision step may read: per query the canonical scores and those of each of the M
    presentations (``{query: {doc: score}}``), the qrels and their relevant grade, the threshold grid, and
    for a consumer with a reader its reader, the questions, passage texts and gold answers."""

    canonical: dict[str, dict[str, float]]
    presentations: list[dict[str, dict[str, float]]]
    qrels: pl.DataFrame
    relevant_grade: int
    grid_points: int
    reader: object = None
    questions: dict[str, str] | None = None
    texts: dict[str, str] | None = None
    golds: dict[str, list[str]] | None = None


PASSAGE_RERANKING = "passage_reranking"
MULTIDOC_QA = "multidoc_qa"
RESPONSE_RANKING = "response_ranking"


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the SQuAD / NQ-open evaluation's
    normalisation; a few lines, so written here rather than pulling in an evaluation package)."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: list[str]) -> bool:
    """Whether the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golds)


@dataclass
class Question:
    """What a reader is given: the question and the passages, in the order it reads them."""

    query_id: str
    text: str
    passages: list[tuple[str, str]]  # (doc id, text), in the order the reader reads them


def retained(scores: dict[str, float], threshold: float) -> list[str]:
    """The retention set at ``threshold``, by decreasing score (ties by doc id)."""
    return sorted((d for d, s in scores.items() if s >= threshold), key=lambda d: (-scores[d], d))


def qa_decisions(canonical: dict[str, dict[str, float]], presentations: list[dict[str, dict[str, float]]],
                 threshold: float, reader, questions: dict[str, str], texts: dict[str, str],
                 golds: dict[str, list[str]]) -> tuple[list[dict], list[dict]]:
    """Multi-document QA over the queries scored canonically and in every presentation.

    Each presentation's retention set at ``threshold``, in the query's canonical-score order, is read
    by ``reader`` (:mod:`posbias.readers`: ``answer(questions) -> answers``; each distinct set once);
    the verdict is exact match against ``golds``. Returns (per-query rows: quality = accuracy over the presentations, flip = answer flip
    rate, verdict_flip, retained = mean set size; per-presentation rows: the answer and its verdict).
    """
    queries = sorted(set(canonical).intersection(*(set(p) for p in presentations)))
    kept: dict[tuple[str, int], tuple[str, ...]] = {}
    for q in queries:
        order = {d: i for i, d in enumerate(retained(canonical[q], -math.inf))}
        for m, p in enumerate(presentations):
            kept[q, m] = tuple(sorted(retained(p[q], threshold), key=order.__getitem__))
    distinct = sorted({(q, docs) for (q, _), docs in kept.items()})
    answers = dict(zip(distinct, reader.answer(
        [Question(q, questions[q], [(d, texts[d]) for d in docs]) for q, docs in distinct])))
    rows, details = [], []
    for q in queries:
        said = [answers[q, kept[q, m]] for m in range(len(presentations))]
        verdicts = [exact_match(a, golds.get(q, [])) for a in said]
        details += [{"query_id": q, "presentation": m, "decision": a, "correct": v}
                    for m, (a, v) in enumerate(zip(said, verdicts))]
        rows.append({"query_id": q, "presentations": len(presentations), "quality": float(np.mean(verdicts)),
                     "flip": metrics.modal_flip([normalize_answer(a) for a in said]),
                     "verdict_flip": metrics.modal_flip(verdicts),
                     "retained": float(np.mean([len(kept[q, m]) for m in range(len(presentations))]))})
    return rows, details


def response_decisions(presentations: list[dict[str, dict[str, float]]],
                       ndcg1: list[dict[str, float]]) -> tuple[list[dict], list[dict]]:
    """Response ranking over the queries scored in every presentation: quality = mean nDCG@1 over the
    presentations (``ndcg1[m][q]``), flip = :func:`posbias.metrics.pair_flip`, verdict_flip = its
    :func:`~posbias.metrics.selection_flip`, over the responses scored in every presentation (by doc
    id, so a tie goes to the lower id); per presentation the decision is the response ranked first."""
    queries = sorted(set.intersection(*(set(p) for p in presentations)))
    rows, details = [], []
    for q in queries:
        shown = [p[q] for p in presentations]
        responses = sorted(set.intersection(*(set(s) for s in shown)))
        matrix = [[scores[r] for r in responses] for scores in shown]
        for m, scores in enumerate(shown):
            details.append({"query_id": q, "presentation": m, "decision": retained(scores, -math.inf)[0],
                            "correct": None})
        rows.append({"query_id": q, "presentations": len(shown),
                     "quality": float(np.mean([n.get(q, 0.0) for n in ndcg1])),
                     "flip": metrics.pair_flip(matrix), "verdict_flip": metrics.selection_flip(matrix),
                     "retained": math.nan})
    return rows, details


def _qa(inputs: DecisionInputs) -> tuple[list[dict], list[dict]]:
    """Multi-document QA's decision step: :func:`qa_decisions` at τ*, the threshold with the best canonical
    set-F1 (as for retention Jaccard)."""
    from posbias.stability import relevant_sets

    common = set(inputs.canonical).intersection(*(set(p) for p in inputs.presentations))
    threshold, _ = metrics.f1_threshold({q: inputs.canonical[q] for q in sorted(common)},
                                        relevant_sets(inputs.qrels, inputs.relevant_grade), inputs.grid_points)
    return qa_decisions(inputs.canonical, inputs.presentations, threshold, inputs.reader, inputs.questions,
                        inputs.texts, inputs.golds)


def _responses(inputs: DecisionInputs) -> tuple[list[dict], list[dict]]:
    """Response ranking's decision step: :func:`response_decisions` with each presentation's nDCG@1."""
    from posbias.stability import ndcg_by_query

    return response_decisions(inputs.presentations,
                              [ndcg_by_query(p, inputs.qrels, "nDCG@1") for p in inputs.presentations])


CONSUMERS = {c.name: c for c in (
    Consumer(PASSAGE_RERANKING, "passage reranking", positions=True),
    Consumer(MULTIDOC_QA, "multi-document QA", reader=True,
             columns={"quality": "accuracy", "flip": "answer flip", "verdict_flip": "verdict flip",
                      "retained": "retained passages"}, decisions=_qa),
    Consumer(RESPONSE_RANKING, "response ranking",
             columns={"quality": "nDCG@1", "flip": "pair flip", "verdict_flip": "selection flip"},
             decisions=_responses),
)}


def get(name: str) -> Consumer:
    try:
        return CONSUMERS[name]
    except KeyError:
        raise ValueError(f"consumer {name!r}: use one of {', '.join(CONSUMERS)}") from None


def with_decisions() -> list[str]:
    """The consumers whose decisions the ``decisions`` rule measures (those with a decision step)."""
    return [name for name, c in CONSUMERS.items() if c.decisions is not None]


def decide(consumer: str, canonical_run: pl.DataFrame, shuffled_runs: list[pl.DataFrame], qrels: pl.DataFrame,
           relevant_grade: int, presentations: int | None, grid_points: int, keys: dict[str, str],
           reader=None, questions: dict[str, str] | None = None, texts: dict[str, str] | None = None,
           golds: dict[str, list[str]] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One scorer's decisions for ``consumer`` over its canonical run and the first ``presentations``
    (M) shuffled runs: (DECISIONS, one row per query; DECISION_DETAILS, one per query and
    presentation), each row carrying ``keys`` (model, dataset, retriever). Multi-document QA needs
    ``reader``, ``questions``, passage ``texts`` and ``golds``; its τ* is retention Jaccard's."""
    from posbias import schemas
    from posbias.stability import bsc_presentations, scores_by_query

    if consumer not in with_decisions():
        raise ValueError(f"consumer {consumer!r} takes no decisions beyond its ranking; use one of {with_decisions()}")
    if len(shuffled_runs) < 2:
        raise ValueError(f"{keys}: decision stability needs at least two shuffled presentations")
    shown = bsc_presentations([scores_by_query(r) for r in shuffled_runs], 1, presentations)
    rows, details = get(consumer).decisions(DecisionInputs(scores_by_query(canonical_run), shown, qrels,
                                                           relevant_grade, grid_points, reader, questions, texts,
                                                           golds))
    rows = [{**keys, "consumer": consumer, **r} for r in rows]
    details = [{**keys, **r} for r in details]
    return (pl.from_arrow(pa.Table.from_pylist(rows, schema=schemas.DECISIONS)),
            pl.from_arrow(pa.Table.from_pylist(details, schema=schemas.DECISION_DETAILS)))
