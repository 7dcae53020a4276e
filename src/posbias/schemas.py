"""The Parquet contracts between stages, declared once.

Every artifact the workflow writes goes through :func:`write`, which checks the columns against the
declared schema, casts to it, and writes to a temporary name that is renamed only when complete, so
a failed job never leaves a half-written table. :func:`read` checks the same schema on the way in.
Ids are strings everywhere; runs are sorted and tie-free (see :mod:`posbias.runs`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from posbias import provenance
from posbias.atomic import replacing
from posbias.errors import PosbiasError

CORPUS = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
QUERIES = pa.schema([("query_id", pa.string()), ("text", pa.string())])
QRELS = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("relevance", pa.int32())])
RUN = pa.schema(
    [("query_id", pa.string()), ("doc_id", pa.string()), ("rank", pa.int32()), ("score", pa.float64())]
)
# A listwise training instance: candidates in input (first-stage) order and the teacher's ranking.
LISTWISE = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("doc_ids", pa.list_(pa.string())),
        ("texts", pa.list_(pa.string())),
        ("teacher_ranking", pa.list_(pa.string())),
    ]
)
# Long-format evaluation results: one row per (system, dataset, query, measure).
METRICS = pa.schema(
    [
        ("system", pa.string()),
        ("dataset", pa.string()),
        ("query_id", pa.string()),
        ("measure", pa.string()),
        ("value", pa.float64()),
    ]
)

# Aggregated evaluation: mean per (system, dataset, measure) and the number of queries averaged.
SUMMARY = pa.schema(
    [
        ("system", pa.string()),
        ("dataset", pa.string()),
        ("measure", pa.string()),
        ("value", pa.float64()),
        ("queries", pa.int64()),
    ]
)

# Sliding-window reranking: one row per passage per window (scores are null for generation models).
WINDOW_LOG = pa.schema(
    [
        ("query_id", pa.string()),
        ("window", pa.int32()),
        ("start", pa.int32()),
        ("end", pa.int32()),
        ("input_position", pa.int32()),
        ("doc_id", pa.string()),
        ("score", pa.float64()),
        ("output_rank", pa.int32()),
    ]
)
# What reranking one query cost: windows, model calls, prompt tokens and (apportioned) wall seconds.
COST = pa.schema(
    [
        ("query_id", pa.string()),
        ("windows", pa.int64()),
        ("calls", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("seconds", pa.float64()),
    ]
)
# Per-query metrics of reranked runs, long format, one row per condition and measure.
RERANK_METRICS = pa.schema(
    [
        ("model", pa.string()),
        ("dataset", pa.string()),
        ("retriever", pa.string()),
        ("order", pa.string()),
        ("debias", pa.string()),
        ("query_id", pa.string()),
        ("measure", pa.string()),
        ("value", pa.float64()),
    ]
)
# The position curve: how the moved relevant passage fares at each input position (1-based).
POSITION_CURVE = pa.schema(
    [
        ("model", pa.string()),
        ("dataset", pa.string()),
        ("retriever", pa.string()),
        ("debias", pa.string()),
        ("position", pa.int32()),
        ("queries", pa.int64()),
        ("ndcg10", pa.float64()),
        ("target_ndcg10", pa.float64()),
        ("target_mrr", pa.float64()),
        ("target_rank", pa.float64()),
        # 95% percentile bootstrap interval of the mean over queries (posbias.permuted_eval.query_interval)
        ("target_ndcg10_lo", pa.float64()),
        ("target_ndcg10_hi", pa.float64()),
        ("target_mrr_lo", pa.float64()),
        ("target_mrr_hi", pa.float64()),
    ]
)
# One row per reranking experiment: quality under original and shuffled orders, stability, cost.
RERANK_SUMMARY = pa.schema(
    [
        ("model", pa.string()),
        ("dataset", pa.string()),
        ("retriever", pa.string()),
        ("debias", pa.string()),
        ("queries", pa.int64()),
        ("ndcg10_original", pa.float64()),
        ("ndcg10_shuffled_mean", pa.float64()),
        ("ndcg10_shuffled_sd", pa.float64()),
        ("shuffles", pa.int64()),
        ("tau_psi", pa.float64()),
        ("curve_spread", pa.float64()),
        ("curve_first", pa.float64()),
        ("curve_last", pa.float64()),
        ("psi", pa.float64()),  # Zeng et al.'s PSI over the curve's positions (posbias.metrics)
        ("windows", pa.int64()),
        ("wall_seconds", pa.float64()),
        ("calls_per_query", pa.float64()),
        ("prompt_tokens_per_query", pa.float64()),
        ("seconds_per_query", pa.float64()),
        ("parse_failures", pa.int64()),
        ("missing_ids", pa.int64()),
        ("capcal_alpha_mean", pa.float64()),
        ("capcal_alpha_sd", pa.float64()),
        ("capcal_at_cap", pa.float64()),
    ]
)

# Propensity estimation: sampled shuffles, their reranked output ranks, and omega.
PROPENSITY_SAMPLES = pa.schema(
    [("query_id", pa.string()), ("shuffle", pa.int32()), ("input_position", pa.int32()), ("doc_id", pa.string())]
)
TRANSITIONS = pa.schema(
    [
        ("query_id", pa.string()),
        ("shuffle", pa.int32()),
        ("input_position", pa.int32()),
        ("doc_id", pa.string()),
        ("output_rank", pa.int32()),
    ]
)
OMEGA = pa.schema([("input_position", pa.int32()), ("output_rank", pa.int32()), ("omega", pa.float64())])
# Training: the loss curve logged by the trainer; grad_norm is the logged step's norm before clipping.
LOSS_CURVE = pa.schema(
    [
        ("step", pa.int64()),
        ("loss", pa.float64()),
        ("rank_loss", pa.float64()),
        ("lm_loss", pa.float64()),
        ("supervised_loss", pa.float64()),
        ("consistency_loss", pa.float64()),
        ("learning_rate", pa.float64()),
        ("ips_clipped_share", pa.float64()),
        ("ips_weight_mean", pa.float64()),
        ("ips_weight_max", pa.float64()),
        ("grad_norm", pa.float64()),
        ("tokens_per_s", pa.float64()),
    ]
)
# OC-SFT: the teacher's scores of contiguous B-document windows, view 0 = first-stage order and views
# 1 … T = seeded shuffles of the top-depth, re-chunked; slot is the 0-based position in the window.
SILVER = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("view", pa.int32()),
        ("window", pa.int32()),
        ("slot", pa.int32()),
        ("score", pa.float64()),
    ]
)
# OC-SFT training instances: one canonical window each, with the silver target per document.
POINTWISE = pa.schema(
    [
        ("query_id", pa.string()),
        ("window", pa.int32()),
        ("query", pa.string()),
        ("doc_ids", pa.list_(pa.string())),
        ("texts", pa.list_(pa.string())),
        ("targets", pa.list_(pa.float64())),
    ]
)
# Decision stability of a scorer: one row per K and budget; K = 1 is the plain model (or debiasing method), K > 1 BSC@K
# (pointwise family) or PermSC@K (listwise family, debias none).
STABILITY = pa.schema(
    [
        ("model", pa.string()),
        ("dataset", pa.string()),
        ("retriever", pa.string()),
        ("debias", pa.string()),
        ("family", pa.string()),
        ("k", pa.int32()),
        ("budget", pa.string()),
        ("presentations", pa.int64()),
        ("queries", pa.int64()),
        ("ndcg10_canonical", pa.float64()),
        ("ndcg10", pa.float64()),
        ("tau_psi", pa.float64()),
        ("jaccard", pa.float64()),
        ("threshold", pa.float64()),
        ("f1", pa.float64()),
        ("retained", pa.float64()),
        ("matched_rate", pa.float64()),
        ("jaccard_matched", pa.float64()),
        ("calls_per_query", pa.float64()),
        ("tokens_per_query", pa.float64()),
        ("seconds_per_query", pa.float64()),
        ("draws", pa.float64()),
        ("tie_rate", pa.float64()),
        ("dispersion", pa.float64()),
        ("top10_instability", pa.float64()),
        ("plain_shift", pa.float64()),
    ]
)
# The same per query (K = 1: the plain scorer; K > 1: BSC@K or PermSC@K), for paired tests between
# methods: STABILITY's keys, the query, and the per-query values.
STABILITY_QUERY_VALUES = ("ndcg10", "tau_psi", "jaccard", "jaccard_matched", "tie_rate", "dispersion", "top10_instability",
                          "plain_shift", "draws")
STABILITY_QUERIES = pa.schema(
    [STABILITY.field(n) for n in ("model", "dataset", "retriever", "debias", "family", "k", "budget")]
    + [pa.field("query_id", pa.string())]
    + [STABILITY.field(n) for n in STABILITY_QUERY_VALUES]
)

# The decisions a consumer (posbias.consumers) takes from one scorer's scores, per query: quality (QA
# accuracy, response ranking nDCG@1), flip (answer flip, pair flip), verdict_flip (QA verdict flip,
# response ranking selection flip) and mean retained passages (QA); flip rates are modal
# (posbias.metrics.modal_flip: 1 − the share of presentations giving the most frequent decision).
DECISIONS = pa.schema(
    [STABILITY.field(n) for n in ("model", "dataset", "retriever")]
    + [
        ("consumer", pa.string()),
        ("query_id", pa.string()),
        ("presentations", pa.int64()),
        ("quality", pa.float64()),
        ("flip", pa.float64()),
        ("verdict_flip", pa.float64()),
        ("retained", pa.float64()),
    ]
)
# Each presentation's decision: the reader's answer and its verdict (QA) or the top response.
DECISION_DETAILS = pa.schema(
    [STABILITY.field(n) for n in ("model", "dataset", "retriever")]
    + [("query_id", pa.string()), ("presentation", pa.int32()), ("decision", pa.string()), ("correct", pa.bool_())]
)
# The pool-replacement design of one scorer, per query (posbias.pool): Pool-PSI of the kept documents
# over the companion pools, and their scores' variance split into document, companion coupling and
# order residual (total = the three).
POOL = pa.schema(
    [STABILITY.field(n) for n in ("model", "dataset", "retriever")]
    + [
        ("query_id", pa.string()),
        ("pools", pa.int64()),
        ("pool_psi", pa.float64()),
        ("document", pa.float64()),
        ("companions", pa.float64()),
        ("order", pa.float64()),
        ("total", pa.float64()),
    ]
)
# Gold answers of a multi-document QA dataset, one row per query.
ANSWERS = pa.schema([("query_id", pa.string()), ("answers", pa.list_(pa.string()))])

SCHEMAS: dict[str, pa.Schema] = {
    "corpus": CORPUS,
    "queries": QUERIES,
    "qrels": QRELS,
    "run": RUN,
    "listwise": LISTWISE,
    "metrics": METRICS,
    "summary": SUMMARY,
    "window_log": WINDOW_LOG,
    "cost": COST,
    "rerank_metrics": RERANK_METRICS,
    "position_curve": POSITION_CURVE,
    "rerank_summary": RERANK_SUMMARY,
    "propensity_samples": PROPENSITY_SAMPLES,
    "transitions": TRANSITIONS,
    "omega": OMEGA,
    "loss_curve": LOSS_CURVE,
    "silver": SILVER,
    "pointwise": POINTWISE,
    "stability": STABILITY,
    "stability_queries": STABILITY_QUERIES,
    "decisions": DECISIONS,
    "decision_details": DECISION_DETAILS,
    "answers": ANSWERS,
    "pool": POOL,
}


def conform(frame: pl.DataFrame, schema: pa.Schema, what: str) -> pa.Table:
    """Check that ``frame`` has exactly the schema's columns and cast it to the schema's types."""
    missing = [name for name in schema.names if name not in frame.columns]
    extra = [name for name in frame.columns if name not in schema.names]
    if missing or extra:
        raise PosbiasError(
            f"{what}: columns {frame.columns} do not match the declared schema {schema.names} "
            f"(missing {missing}, unexpected {extra})"
        )
    table = frame.select(schema.names).to_arrow()
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PosbiasError(f"{what}: cannot cast to the declared schema ({exc})") from exc


def write(frame: pl.DataFrame, path: str | os.PathLike, kind: str) -> None:
    """Validate ``frame`` against schema ``kind`` and write it atomically to ``path``, with the provenance
    record (:mod:`posbias.provenance`) in the Parquet schema metadata."""
    path = Path(path)
    table = conform(frame, SCHEMAS[kind], f"{kind} table for {path}")
    meta = {**(table.schema.metadata or {}), provenance.KEY.encode(): json.dumps(provenance.record(), sort_keys=True)}
    table = table.replace_schema_metadata(meta)
    with replacing(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read(path: str | os.PathLike, kind: str) -> pl.DataFrame:
    """Read a Parquet artifact and check it against schema ``kind``."""
    path = Path(path)
    if not path.is_file():
        raise PosbiasError(f"{path}: no such file; build it with the workflow stage that produces {kind} tables")
    try:
        frame = pl.from_arrow(pq.read_table(path))
    except (pa.ArrowInvalid, OSError) as exc:  # truncated, overwritten or not Parquet at all
        raise PosbiasError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]}); delete it and rerun "
                           "the job that writes it (snakemake --forcerun <rule> <file>)") from None
    assert isinstance(frame, pl.DataFrame)
    return pl.from_arrow(conform(frame, SCHEMAS[kind], f"{kind} table {path}"))  # type: ignore[return-value]
