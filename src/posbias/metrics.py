"""Evaluation of runs against qrels with ir_measures, in the long format every table is built from.

Conventions: a query is evaluated when it has qrels; a qrels query missing from the run (no
hits) scores 0 on every measure rather than being dropped, so systems are always averaged over the
same query set. Runs are canonical (:mod:`posbias.runs`), so the score order ir_measures sorts by
is exactly the rank order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import combinations

import ir_measures
import numpy as np
import polars as pl

from posbias.errors import PosbiasError


def parse_measures(names: list[str]) -> list:
    """Parse measure names in ir_measures syntax (``nDCG@10``, ``R@100``, ``AP``, ``AP(rel=2)``)."""
    measures = []
    for name in names:
        try:
            measures.append(ir_measures.parse_measure(name))
        except (NameError, ValueError, SyntaxError, TypeError):
            raise PosbiasError(
                f"evaluation.measures: {name!r} is not an ir_measures measure (e.g. nDCG@10, R@100, AP)"
            ) from None
    return measures


DL_GRADES = frozenset({0, 1, 2, 3})  # TREC Deep Learning's relevance scale (passage and document tracks)
DL_BINARY_REL = 2  # the grade from which TREC DL's binary measures count a passage relevant (trec_eval -l 2)


def is_dl_graded(qrels: pl.DataFrame) -> bool:
    """Whether ``qrels`` are graded on TREC DL's 0–3 scale (their top grade is 3)."""
    grades = set(qrels["relevance"].unique().to_list())
    return bool(grades) and grades <= DL_GRADES and max(grades) == 3


def as_evaluated(measure_names: list[str], dl_graded: bool) -> list:
    """The measures as evaluated: on TREC DL-graded qrels, a binary measure written without ``rel``
    counts grade ≥ 2 as relevant (``AP`` → ``AP(rel=2)``, ``R@100`` → ``R(rel=2)@100``), the convention
    of the TREC DL overviews and of Anserini's DL regressions (``trec_eval -l 2``), so that the numbers
    compare with theirs; measures with their own ``rel``, graded measures (nDCG) and other qrels (binary,
    BEIR, Cranfield) as written. The measure's name in every table says which was computed."""
    out = []
    for measure in parse_measures(measure_names):
        if dl_graded and "rel" in measure.SUPPORTED_PARAMS and "rel" not in measure.params:
            measure = measure(rel=DL_BINARY_REL)
        out.append(measure)
    return out


def evaluate(run: pl.DataFrame, qrels: pl.DataFrame, measure_names: list[str], system: str, dataset: str,
             dl_graded: bool | None = None) -> pl.DataFrame:
    """Per-query values of every measure (:func:`as_evaluated`; ``dl_graded``: whether the collection's qrels are
    graded like TREC DL's, read from ``qrels`` when None: pass it when ``qrels`` are a subset of the collection's,
    whose grades may not reach 3), long format (system, dataset, query_id, measure, value)."""
    measures = as_evaluated(measure_names, is_dl_graded(qrels) if dl_graded is None else dl_graded)
    judged = qrels["query_id"].unique().sort().to_list()
    run = run.filter(pl.col("query_id").is_in(judged))
    qrels_iter = (ir_measures.Qrel(q, d, int(r)) for q, d, r in qrels.select("query_id", "doc_id", "relevance").iter_rows())
    run_iter = [ir_measures.ScoredDoc(q, d, s) for q, d, s in run.select("query_id", "doc_id", "score").iter_rows()]
    values = {(m.query_id, str(m.measure)): float(m.value) for m in ir_measures.iter_calc(measures, qrels_iter, run_iter)}
    rows = [
        (system, dataset, qid, str(measure), values.get((qid, str(measure)), 0.0))
        for qid in judged
        for measure in measures
    ]
    return pl.DataFrame(rows, schema=["system", "dataset", "query_id", "measure", "value"], orient="row")


def aggregate(per_query: pl.DataFrame) -> pl.DataFrame:
    """Mean over queries per (system, dataset, measure), with the number of queries."""
    return (
        per_query.group_by("system", "dataset", "measure", maintain_order=True)
        .agg(pl.col("value").mean(), pl.len().alias("queries"))
        .sort("dataset", "system", "measure")
    )


def tau_psi(rankings: Sequence[Sequence[str]]) -> float:
    """One query's permutation sensitivity ψ = (1 − mean Kendall τ) / 2 over all pairs of its rankings.

    ``rankings`` are the M ≥ 2 rankings (best first) of the same items produced from M input
    orders. ψ = 0 when every ranking agrees, 0.5 for unrelated rankings, 1 for pairwise reversals.
    """
    if len(rankings) < 2:
        raise ValueError(f"tau_psi needs at least 2 rankings, got {len(rankings)}")
    items = sorted(rankings[0])
    if len(items) < 2:
        return 0.0
    positions = []
    for ranking in rankings:
        if sorted(ranking) != items:
            raise ValueError("tau_psi: every ranking must order the same items")
        where = {doc: i for i, doc in enumerate(ranking)}
        positions.append([where[doc] for doc in items])
    taus = [permutation_kendall_tau(a, b) for a, b in combinations(positions, 2)]
    return (1.0 - sum(taus) / len(taus)) / 2.0


def permutation_kendall_tau(x: Sequence[int], y: Sequence[int]) -> np.float64:
    """Kendall's τ of two rankings without ties (the positions of the same items in two permutations),
    computed as ``scipy.stats.kendalltau`` computes τ-b there, to the last bit (tested against it):
    (C − D) / √n₀ / √n₀ with n₀ = n(n − 1)/2 pairs. Written here because importing ``scipy.stats``
    costs about 1.3 CPU-seconds, more than the rest of a metrics job, and a run has hundreds of them."""
    a, b = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    if len(np.unique(a)) != len(a) or len(np.unique(b)) != len(b) or len(a) != len(b):
        raise ValueError("permutation_kendall_tau: two rankings of the same length without ties")
    size = np.int64(len(a))
    tot = (size * (size - 1)) // 2
    signs = np.sign(a[:, None] - a[None, :]) * np.sign(b[:, None] - b[None, :])
    dis = np.int64((signs < 0).sum() // 2)
    tau = (tot - 2 * dis) / np.sqrt(tot) / np.sqrt(tot)
    return np.minimum(1.0, max(-1.0, tau))


def position_sensitivity_index(values: Sequence[float]) -> float:
    """Zeng et al.'s Position Sensitivity Index, PSI = 1 − min(s)/max(s), ``values`` the metric (e.g. nDCG@10)
    over positional subsets (the relevant passage at the beginning, middle, end, …): 0 is position-robust, 1 a
    subset scored 0; a worst-case measure (their README: 1 − 0.9246/0.9503 = 0.027). τ-PSI (:func:`tau_psi`),
    which the OC-SFT paper adapts from it, acts on ranks instead. ValueError unless max > 0 and none is negative."""
    values = [float(v) for v in values]
    if not values or max(values) <= 0 or min(values) < 0:
        raise ValueError(f"position_sensitivity_index needs non-negative metric values with max > 0, got {values}")
    return 1.0 - min(values) / max(values)


def modal_flip(decisions: Sequence[Hashable]) -> float:
    """One instance's flip rate over its M presentations: 1 − the share of the presentations whose
    decision is the most frequent one (0 when all agree; (M − 1) / M at most). The OC-SFT paper's
    public code counts its answer flip this way; every flip rate here (answer, verdict, selection,
    pair) is this function of the right decision."""
    if not decisions:
        raise ValueError("a flip rate needs at least one presentation")
    return 1.0 - max(Counter(decisions).values()) / len(decisions)


def _score_matrix(scores) -> np.ndarray:
    matrix = np.asarray(scores, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"scores: one prompt's M x n array (presentation x response), got shape {matrix.shape}")
    return matrix


def selection_flip(scores) -> float:
    """Selection flip of one prompt: :func:`modal_flip` of the top-scored response over the M
    presentations. ``scores``: M x n (row = presentation, column = response, the same response order
    in every row); ties go to the lower column index."""
    return modal_flip(np.argmax(_score_matrix(scores), axis=1).tolist())


def pair_flip(scores) -> float:
    """Pair flip of one prompt (OC-SFT: "只测了供给偏好训练的 chosen/rejected 对"): in each of the M
    presentations the top-scored response is chosen and the bottom-scored one rejected; the flip is
    :func:`modal_flip` of that (chosen, rejected) pair. ``scores`` as for :func:`selection_flip`;
    ties go to the lower column index on both ends."""
    matrix = _score_matrix(scores)
    return modal_flip(list(zip(np.argmax(matrix, axis=1).tolist(), np.argmin(matrix, axis=1).tolist())))


def _set_f1(retained: set[str], relevant: set[str]) -> float:
    if not retained and not relevant:
        return 1.0
    return 2.0 * len(retained & relevant) / (len(retained) + len(relevant))


def _jaccard(a: set[str], b: set[str]) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def f1_threshold(canonical_scores: dict[str, dict[str, float]], relevant: dict[str, set[str]],
                 grid_points: int = 41) -> tuple[float, float]:
    """(τ*, its mean set-F1): over a grid of ``grid_points`` evenly spaced values between the lowest
    and highest pooled score, the threshold whose sets {d : score ≥ τ} have the highest mean per-query
    F1 against ``relevant`` (ties go to the higher threshold; a query with neither retained nor
    relevant documents has F1 = 1). Queries are those with scores."""
    queries = [q for q in canonical_scores if canonical_scores[q]]
    pooled = np.array([s for q in queries for s in canonical_scores[q].values()], dtype=float)
    grid = np.linspace(pooled.min(), pooled.max(), grid_points)
    best_tau, best_f1 = float(grid[-1]), -1.0
    for tau in grid:  # ascending, so ">=" keeps the higher threshold on ties
        f1 = float(np.mean([_set_f1({d for d, s in canonical_scores[q].items() if s >= tau}, relevant.get(q, set()))
                            for q in queries]))
        if f1 >= best_f1:
            best_tau, best_f1 = float(tau), f1
    return best_tau, best_f1


def rate_threshold(canonical_scores: dict[str, dict[str, float]], rate: float) -> float:
    """The threshold that keeps the share ``rate`` of the pooled canonical (query, document) scores: the
    n-th highest score, n = max(1, round(rate · N)) (ties at it are kept too, so the share can exceed
    ``rate``). OC-SFT's matched-retention-rate control places every scorer's threshold at the same rate."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate_threshold: rate must be in (0, 1], got {rate}")
    pooled = sorted((s for scores in canonical_scores.values() for s in scores.values()), reverse=True)
    if not pooled:
        raise ValueError("rate_threshold: no canonical scores")
    return float(pooled[max(1, round(rate * len(pooled))) - 1])


def retention_jaccard(canonical_scores: dict[str, dict[str, float]], relevant: dict[str, set[str]],
                      scores_over_perms: dict[str, dict[str, list[float]]], grid_points: int = 41,
                      rate: float | None = None) -> dict:
    """Decision stability of a pointwise scorer that keeps every document scoring ≥ a threshold.

    The threshold τ* is chosen on the canonical order: the best mean set-F1 (:func:`f1_threshold`), or,
    given ``rate``, the one keeping that share of the canonical scores (:func:`rate_threshold`). Each
    query's M presentations (``scores_over_perms[q][d][m]``) then give M retained sets; the result's
    ``jaccard`` is the mean over queries of their mean pairwise Jaccard (two empty sets count as 1),
    ``f1`` the mean canonical F1 at τ*, ``retained`` the share of canonical scores ≥ τ*, ``per_query``
    each query's mean pairwise Jaccard.

    Queries are those of ``canonical_scores`` that also appear in ``scores_over_perms``.
    """
    queries = sorted(q for q in canonical_scores if q in scores_over_perms and canonical_scores[q])
    if not queries:
        raise ValueError("retention_jaccard: no query has both canonical scores and permuted scores")
    shown = {q: canonical_scores[q] for q in queries}
    if rate is None:
        best_tau, best_f1 = f1_threshold(shown, relevant, grid_points)
    else:
        best_tau = rate_threshold(shown, rate)
        best_f1 = float(np.mean([_set_f1({d for d, s in shown[q].items() if s >= best_tau}, relevant.get(q, set()))
                                 for q in queries]))
    pooled = [s for q in queries for s in shown[q].values()]
    per_query: dict[str, float] = {}
    presentations = None
    for q in queries:
        perms = scores_over_perms[q]
        m = {len(v) for v in perms.values()}
        if len(m) != 1:
            raise ValueError(f"retention_jaccard: query {q} has documents scored in different numbers of presentations")
        presentations = m.pop()
        retained = [{d for d, v in perms.items() if v[i] >= best_tau} for i in range(presentations)]
        if presentations >= 2:
            per_query[q] = float(np.mean([_jaccard(a, b) for a, b in combinations(retained, 2)]))
    return {"threshold": best_tau, "f1": best_f1, "retained": sum(s >= best_tau for s in pooled) / len(pooled),
            "jaccard": float(np.mean(list(per_query.values()))) if per_query else float("nan"),
            "queries": len(queries), "presentations": presentations, "per_query": per_query}


def tie_rate(scores: Sequence[float]) -> float:
    """The share of one list's document pairs whose scores are exactly equal (ties a sort must break
    by something other than the score: an order-dependent decision)."""
    values = list(scores)
    pairs = len(values) * (len(values) - 1) / 2
    if not pairs:
        return 0.0
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return sum(c * (c - 1) / 2 for c in counts.values()) / pairs


def score_dispersion(scores: Sequence[float]) -> float:
    """The population standard deviation of one list's scores: how far apart a scorer places the
    documents it must order (near 0: small perturbations reorder them)."""
    return float(np.std(np.asarray(list(scores), dtype=float))) if len(scores) else 0.0


def topk_instability(rankings: Sequence[Sequence[str]], k: int = 10) -> float:
    """1 − the mean pairwise Jaccard of the top-``k`` sets of M ≥ 2 rankings of the same query:
    0 when every presentation keeps the same top k, 1 when no two share a document."""
    if len(rankings) < 2:
        raise ValueError(f"topk_instability needs at least 2 rankings, got {len(rankings)}")
    tops = [set(r[:k]) for r in rankings]
    return 1.0 - sum(_jaccard(a, b) for a, b in combinations(tops, 2)) / (len(tops) * (len(tops) - 1) / 2)


def pool_psi(scores_by_pool: Sequence[dict[str, float]], kept: Sequence[str]) -> float:
    """Pool-PSI of one query: τ-PSI (:func:`tau_psi`) of the ``kept`` documents' rankings over M ≥ 2
    presentations that keep them and replace every other document of the window with another draw
    from the candidate pool (``scores_by_pool[m][d]``: the score of d in presentation m). It isolates
    companion effects from a scorer's own noise: an order- and companion-free scorer has Pool-PSI 0."""
    rankings = [sorted(kept, key=lambda d, s=s: (-s[d], d)) for s in scores_by_pool]
    return tau_psi(rankings)


def variance_decomposition(scores: pl.DataFrame) -> dict[str, float]:
    """Split the variance of one query's scores over a balanced design of presentations into the
    document (what the scorer should measure), its companions and their order.

    ``scores`` has columns ``doc_id``, ``pool`` (which companion set the document was shown with),
    ``order`` (which arrangement of that set) and ``score``, every document seen in the same number
    of pools and orders. By the law of total variance (population variances):

    - ``document``: the variance over documents of their mean scores;
    - ``companions`` (companion coupling): the mean over documents of the variance over pools of the
      (document, pool) mean scores;
    - ``order`` (the order residual): the mean over (document, pool) of the variance over orders;

    and ``total`` = document + companions + order, the variance of all scores.
    """
    cell = scores.group_by("doc_id", "pool", maintain_order=True).agg(
        pl.col("score").mean().alias("cell"), pl.col("score").var(ddof=0).alias("order"))
    doc = cell.group_by("doc_id", maintain_order=True).agg(
        pl.col("cell").mean().alias("mean"), pl.col("cell").var(ddof=0).alias("pools"), pl.col("order").mean())
    if (scores.group_by("doc_id", maintain_order=True).len()["len"].n_unique() != 1
            or cell.group_by("doc_id", maintain_order=True).len()["len"].n_unique() != 1):
        raise ValueError("variance_decomposition: every document needs the same number of pools and orders")
    parts = {"document": float(doc["mean"].var(ddof=0)), "companions": float(doc["pools"].mean()),
             "order": float(doc["order"].mean())}
    return {**parts, "total": float(scores["score"].var(ddof=0))}
