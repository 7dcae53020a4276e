"""Gold answers of a multi-document QA dataset (``consumer: multidoc_qa``), schema ANSWERS.

- ``irds``: the queries' ``answers`` field, as ir_datasets gives it for open-domain QA ids
  (``dpr-w100/natural-questions/dev``, ``dpr-w100/trivia-qa/dev``);
- ``answers:`` a JSON Lines file of ``{"query_id": ..., "answers": [...]}`` (trec, imported);
- ``toy``: each query's best-graded passage's text (ties: the lowest doc id), the answer the
  simulated reader gives when its retained set holds enough relevant passages.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.errors import PosbiasError
from posbias.textfiles import jsonl, require_file


def frame(rows: dict[str, list[str]]) -> pl.DataFrame:
    return pl.DataFrame({"query_id": list(rows), "answers": list(rows.values())},
                        schema={"query_id": pl.String, "answers": pl.List(pl.String)})


def from_file(path: str, key: str) -> pl.DataFrame:
    """The answers of a JSON Lines file (config key ``key`` for messages)."""
    file = require_file(path, "answers", key)
    rows: dict[str, list[str]] = {}
    for lineno, record in jsonl(Path(file)):
        qid, answers = record.get("query_id"), record.get("answers")
        if qid is None or not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise PosbiasError(f"{path}:{lineno}: expected {{\"query_id\": ..., \"answers\": [strings]}} ({key})")
        if str(qid) in rows:
            raise PosbiasError(f"{path}:{lineno}: query {qid} has answers twice ({key}); one line per query")
        rows[str(qid)] = answers
    return frame(rows)


def from_irds(dataset_id: str, home: str | None = None) -> pl.DataFrame:
    """The ``answers`` field of an ir_datasets id's queries (:func:`posbias.data.irds.queries`)."""
    from posbias.data import irds

    rows = {}
    for query in irds.queries(dataset_id, home):
        answers = getattr(query, "answers", None)
        if answers is None:
            raise PosbiasError(f"datasets: ir_datasets id {dataset_id!r} has no answers on its queries; a "
                               "multidoc_qa dataset needs them (e.g. dpr-w100/natural-questions/dev) or an "
                               "`answers` file")
        rows[query.query_id] = [str(a) for a in answers]
    return frame(rows)


def best_passages(corpus: pl.DataFrame, qrels: pl.DataFrame) -> pl.DataFrame:
    """Each query's best-graded passage's text as its one answer (the toy task)."""
    best = (qrels.sort(["query_id", "relevance", "doc_id"], descending=[False, True, False])
            .group_by("query_id", maintain_order=True).first()
            .join(corpus.select("doc_id", "text"), on="doc_id", how="left"))
    return frame({q: [t] for q, t in best.select("query_id", "text").iter_rows()})


def load(name: str, spec: dict, corpus: pl.DataFrame, qrels: pl.DataFrame, home: str | None = None) -> pl.DataFrame:
    """The gold answers of dataset ``name`` (see the module docstring)."""
    if "answers" in spec:
        table = from_file(spec["answers"], f"datasets.{name}.answers")
        missing = sorted(set(qrels["query_id"].to_list()) - set(table["query_id"].to_list()))
        if missing:  # the reader's answer to such a query would count as wrong, not as unanswerable
            raise PosbiasError(f"{spec['answers']}: no answers for {len(missing)} of the dataset's judged queries "
                               f"(e.g. {missing[0]!r}) (datasets.{name}.answers); add a line per judged query")
        return table
    if spec["source"] == "irds":
        return from_irds(spec["id"], home)
    if spec["source"] == "toy":
        return best_passages(corpus, qrels)
    raise PosbiasError(f"config: datasets.{name} is a multidoc_qa dataset without gold answers; give it an "
                       "`answers` file (JSON Lines of {query_id, answers})")
