"""Silver labels for OC-SFT: a teacher scores the training queries' first-stage top-``depth``.

View 0 is the **anchor**: the top-``depth`` in first-stage order cut into contiguous windows of B,
each window presented in its own seeded permutation (:func:`anchor_order`, seeded by the config
seed, the query and the window). It is the view the student is supervised on, so its labels are
the teacher's scores of exactly that presentation (a position-biased teacher's bias included: what
a single-order student can learn and OC-SFT's penalty removes). Views 1 … T present seeded
shuffles of the top-``depth`` (the ``shuffled-v`` orders of :mod:`posbias.orders`), re-chunked the
same way. The teacher is any pointwise scorer (the Grades scorer, by default the student's own
base model, i.e. self-distillation; or the simulated grader) or ``qrels`` (grade / 3, the embedded
demo's teacher, order-free by construction; grades clipped to 0 … 3, so a negative grade, TREC's
"junk" −2, is a 0 label as the evaluation counts it non-relevant).

From the silver table the trainer takes:
- :func:`instances`: the anchor windows (documents in anchor order) with their targets: the view-0
  score (``single_order``, ``ocsft``, ``perm_aug``, ``debiasfirst_pointwise``) or the mean over the
  T shuffles (``order_averaged``: T × the teacher cost).
- :func:`slot_propensity`: π(slot) = mean shuffled-view score at that slot / mean shuffled-view
  score. Shuffling makes relevance independent of the slot, so π isolates the teacher's
  multiplicative position effect; ``debiasfirst_pointwise`` weights the supervised term by 1/π.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from posbias import metrics, orders
from posbias.data.collection import passage_texts
from posbias.permute import derive_seed, fisher_yates
from posbias.rerank import Candidates, chunks, present_candidates, rerank

QRELS_TEACHER = "qrels"


def anchor_order(n: int, seed: int, query_id: str, window: int) -> list[int]:
    """The anchor view of one window: a seeded permutation of its ``n`` first-stage slots (entry p is
    the first-stage index shown in slot p)."""
    return fisher_yates(list(range(n)), derive_seed(seed, "ocsft-anchor", query_id, window))


def anchored(c: Candidates, window: int, seed: int) -> Candidates:
    """``c`` with every contiguous window of ``window`` documents put in its anchor order."""
    docs: list[str] = []
    for w, (start, end) in enumerate(chunks(len(c.doc_ids), window)):
        part = c.doc_ids[start:end]
        docs += [part[i] for i in anchor_order(len(part), seed, c.query_id, w)]
    return Candidates(c.query_id, c.query, docs, c.texts, c.key)


def _views(first_stage: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, grades: dict, seed: int,
           depth: int, window: int, shuffles: int, max_queries: int | None) -> list[tuple[int, list[Candidates]]]:
    out = []
    for view in range(shuffles + 1):
        order = orders.parse(orders.ORIGINAL if view == 0 else orders.shuffled(view - 1))
        shown = present_candidates(first_stage, queries, corpus, grades, order, seed, depth, 1, depth, max_queries)
        out.append((view, [anchored(c, window, seed) for c in shown.lists] if view == 0 else shown.lists))
    return out


def silver_labels(teacher, first_stage: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame,
                  grades: dict[str, dict[str, int]], seed: int, depth: int, window: int,
                  shuffles: int, max_queries: int | None = None,
                  batch_size: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(silver table, per-query teacher cost) for ``teacher`` = a pointwise scorer or ``"qrels"``
    (``batch_size``: windows per model batch; unused by the qrels teacher)."""
    rows: dict[str, list] = {k: [] for k in ("query_id", "doc_id", "view", "window", "slot", "score")}
    costs = []
    for view, lists in _views(first_stage, queries, corpus, grades, seed, depth, window, shuffles, max_queries):
        if teacher == QRELS_TEACHER:
            for c in lists:
                for w, (start, end) in enumerate(chunks(len(c.doc_ids), window)):
                    for slot, doc in enumerate(c.doc_ids[start:end]):
                        rows["query_id"].append(c.query_id)
                        rows["doc_id"].append(doc)
                        rows["view"].append(view)
                        rows["window"].append(w)
                        rows["slot"].append(slot)
                        rows["score"].append(min(max(grades.get(c.query_id, {}).get(doc, 0), 0), 3) / 3.0)
            continue
        if not teacher.pointwise or batch_size is None:
            raise ValueError("the silver-label teacher must be a pointwise scorer (mode grades) with a batch size, "
                             "or 'qrels'")
        _, log, cost = rerank(teacher, lists, window, window, batch_size)
        rows["query_id"] += log["query_id"].to_list()
        rows["doc_id"] += log["doc_id"].to_list()
        rows["view"] += [view] * log.height
        rows["window"] += log["window"].to_list()
        rows["slot"] += log["input_position"].to_list()
        rows["score"] += log["score"].to_list()
        costs.append(cost.with_columns(view=pl.lit(view, pl.Int32)))
    silver = pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "view": pl.Int32,
                                        "window": pl.Int32, "slot": pl.Int32, "score": pl.Float64})
    cost = (pl.concat(costs).group_by("query_id", maintain_order=True)
            .agg(pl.col("windows", "calls", "prompt_tokens", "seconds").sum()).sort("query_id") if costs else
            pl.DataFrame(schema={"query_id": pl.String, "windows": pl.Int64, "calls": pl.Int64,
                                 "prompt_tokens": pl.Int64, "seconds": pl.Float64}))
    return silver.sort("query_id", "view", "window", "slot"), cost


def instances(silver: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, averaged: bool) -> pl.DataFrame:
    """The anchor (view 0) windows, documents in anchor order, with their targets (schema POINTWISE).

    ``averaged``: the target of a document is its mean score over the shuffled views (1 … T) instead
    of its view-0 score; it needs T ≥ 1.
    """
    canonical = silver.filter(pl.col("view") == 0).sort("query_id", "window", "slot")  # the anchor order
    if averaged:
        shuffled = silver.filter(pl.col("view") > 0)
        if shuffled.height == 0:
            raise ValueError("order-averaged targets need silver labels with shuffles > 0")
        mean = shuffled.group_by("query_id", "doc_id", maintain_order=True).agg(pl.col("score").mean().alias("target"))
        canonical = canonical.join(mean, on=["query_id", "doc_id"], how="left")
    else:
        canonical = canonical.with_columns(target=pl.col("score"))
    texts = passage_texts(corpus, canonical["doc_id"])
    query_text = dict(queries.select("query_id", "text").iter_rows())
    grouped = canonical.group_by("query_id", "window", maintain_order=True).agg(
        pl.col("doc_id").alias("doc_ids"), pl.col("target").alias("targets"))
    return grouped.with_columns(
        query=pl.col("query_id").replace_strict(query_text, return_dtype=pl.String),
        texts=pl.col("doc_ids").list.eval(pl.element().replace_strict(texts, return_dtype=pl.String)),
    ).select("query_id", "window", "query", "doc_ids", "texts", "targets")


def slot_propensity(silver: pl.DataFrame, window: int, floor: float = 1e-3) -> np.ndarray:
    """π(slot) for slots 0 … window−1 from the shuffled views (all ones without shuffles)."""
    shuffled = silver.filter(pl.col("view") > 0)
    if shuffled.height == 0:
        return np.ones(window)
    overall = shuffled["score"].mean()
    by_slot = dict(shuffled.group_by("slot", maintain_order=True).agg(pl.col("score").mean()).iter_rows())
    if not overall:
        return np.ones(window)
    return np.array([max(by_slot.get(s, overall) / overall, floor) for s in range(window)])


def slot_weights(propensity: np.ndarray, clip: float | None) -> np.ndarray:
    """Inverse slot propensities, clipped at ``clip`` and normalised to mean 1 (the loss scale is kept)."""
    w = 1.0 / np.asarray(propensity, dtype=float)
    if clip is not None:
        w = np.minimum(w, clip)
    return w / w.mean()


def label_quality(silver: pl.DataFrame, qrels: pl.DataFrame) -> float:
    """The teacher's label quality: mean nDCG@10 (ir_measures) over the labelled queries of the ranking its
    anchor-view (view 0) scores give, against the training queries' qrels (our reading of the OC-SFT paper's
    标签质量, which it does not define)."""
    anchor = silver.filter(pl.col("view") == 0).select("query_id", "doc_id", "score")
    judged = qrels.filter(pl.col("query_id").is_in(anchor["query_id"].unique().to_list()))
    if anchor.is_empty() or judged.is_empty():
        return float("nan")
    values = metrics.evaluate(anchor, judged, ["nDCG@10"], "teacher", "silver")["value"]
    return float(values.mean())


def label_consistency(silver: pl.DataFrame) -> dict[str, float]:
    """Silver-β: how order-consistent the teacher's own labels are over its T + 1 views of each query's
    top-depth (the anchor and T shuffles): ``tau_psi``, the mean per-query τ-PSI of the rankings its
    scores give (:func:`posbias.metrics.tau_psi`), and ``label_sd``, the mean over documents of the
    sd of a document's score over the views. A student trained on these labels inherits this much
    order dependence; NaN without shuffles (T = 0)."""
    if silver.filter(pl.col("view") > 0).height == 0:
        return {"tau_psi": float("nan"), "label_sd": float("nan")}
    psi = []
    for _, part in silver.group_by("query_id", maintain_order=True):
        views = part.partition_by("view", maintain_order=True)
        psi.append(metrics.tau_psi([v.sort(["score", "doc_id"], descending=[True, False])["doc_id"].to_list()
                                    for v in views]))
    sd = silver.group_by("query_id", "doc_id", maintain_order=True).agg(pl.col("score").std(ddof=0))["score"]
    return {"tau_psi": float(np.mean(psi)), "label_sd": float(sd.mean())}
