"""The kinds of result file the reporting layer reads, each with how its files are read.

A report rule names its inputs by these kinds (``metrics: [...]``, ``stability: [...]``); the report script
reads each with :func:`read` and hands the registered builders the inputs they declare (the config's values,
such as ``training`` or ``variants``, come as the rule's params instead). One reader per kind, so every
table that reads a kind reads it the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from posbias import metrics, schemas
from posbias.augment import position_rank_table


def _concat(schema: str) -> Callable[[list[str]], pl.DataFrame]:
    def read(files: list[str]) -> pl.DataFrame:
        if not files:  # a rule whose config has none of them (e.g. no consumer dataset): an empty frame
            return pl.from_arrow(schemas.SCHEMAS[schema].empty_table())
        return pl.concat([schemas.read(p, schema) for p in files])

    return read


def _train_seconds(files: list[str]) -> dict[str, float]:
    """A training job's measured seconds (its Snakemake benchmark TSV), by model."""
    return {Path(p).stem: float(pl.read_csv(p, separator="\t")["s"][0]) for p in files}


def _silver_stats(files: list[str]) -> pl.DataFrame:
    """Per silver-label job (its stats JSON, ``…/{dataset}/{teacher}/t{T}.stats.json``): dataset, teacher,
    shuffles, labelled queries, label quality and silver-β (the labels' τ-PSI and score sd over the teacher's
    views; NaN without shuffles, and label quality NaN in a stats file written before 0.16.0 recorded it)."""
    rows = []
    for p in files:
        stats = json.loads(Path(p).read_text())
        beta = stats.get("silver_beta") or {}
        rows.append({"dataset": Path(p).parent.parent.name, "teacher": Path(p).parent.name,
                     "shuffles": stats["shuffles"], "queries": stats.get("queries"),
                     "label_ndcg10": float(stats.get("label_ndcg10", "nan")),
                     "silver_beta": float(beta.get("tau_psi", "nan")), "label_sd": float(beta.get("label_sd", "nan"))})
    schema = {"dataset": pl.String, "teacher": pl.String, "shuffles": pl.Int64, "queries": pl.Int64,
              "label_ndcg10": pl.Float64,
              "silver_beta": pl.Float64, "label_sd": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _position_ranks(files: list[str]) -> dict[str, pl.DataFrame]:
    """Per augmentation (the file's stem, in the rule's order): the input position of the teacher's best passage."""
    return {Path(p).stem: position_rank_table(schemas.read(p, "listwise")) for p in files}


READERS: dict[str, Callable[[list[str]], object]] = {
    "metrics": _concat("rerank_metrics"),
    "summaries": _concat("rerank_summary"),
    "curves": _concat("position_curve"),
    "first_stage": _concat("metrics"),
    "retrieval_summary": lambda files: metrics.aggregate(_concat("metrics")(files)),
    "stability": _concat("stability"),
    "stability_queries": _concat("stability_queries"),
    "decisions": _concat("decisions"),
    "pool": _concat("pool"),
    "silver_stats": _silver_stats,
    "position_ranks": _position_ranks,
    "train_seconds": _train_seconds,
    "plan": lambda files: pl.read_parquet(files[0]),
    # rerank batch folders: a rule depends on them and reads their orders' files by the paths in its params
    # (the plan check's cost files: `costs`, each with its planned keys)
    "reranked": list,
}


def read(named: Iterable[tuple[str, str | list[str]]]) -> dict[str, object]:
    """Each (kind, files) pair read by its kind's reader; ValueError naming the kinds for an unknown one."""
    out = {}
    for kind, files in named:
        if kind not in READERS:
            raise ValueError(f"report input {kind!r} is not a kind of result file; use one of {', '.join(READERS)}")
        out[kind] = READERS[kind]([files] if isinstance(files, str) else list(files))
    return out
