"""Decision stability tables: OC-SFT's (pointwise scorers over seeds, with BSC@K), its settings, and
listwise and pointwise scorers on the same metrics and queries."""

from __future__ import annotations

import math

import polars as pl

from posbias.debias import AGGREGATE_LISTS, AVERAGE_SCORES
from posbias.debias.adaptive import ADAPTIVE, FIXED
from posbias.paper.seeds import named_variants, shown
from posbias.paper.stats import ALPHA, holm_by_metric, mean_sd, paired_against, significant
from posbias.paper.writers import Table, fmt, fmt_sd, view_or_none

# The per-model columns averaged over a variant's seeds (mean ± sd), and how the table prints them.
SEED_COLUMNS = {"ndcg10_canonical": "nDCG@10 canonical", "ndcg10": "nDCG@10 shuffled", "tau_psi": "τ-PSI",
                "jaccard": "retention Jaccard", "f1": "F1 at τ*", "tie_rate": "ties",
                "dispersion": "score sd", "top10_instability": "top-10 instability"}
TESTED = ("ndcg10", "tau_psi", "jaccard")  # paired over queries against the reference variant
ALL_DATASETS = "mean over datasets"


def k_label(k: int, budget: str) -> str:
    """How a row's K prints: ``K`` draws, or ``≤K adaptive`` (draws until the aggregate settles, at most K)."""
    return str(k) if budget == FIXED else f"≤{k} {ADAPTIVE}"


def _variants(table: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    return named_variants(table, variants)


def seed_means(table: pl.DataFrame, variants: dict[str, str], train_seconds: dict[str, float]) -> pl.DataFrame:
    """One row per (variant, dataset, retriever, K): each column's mean and sd over the variant's seeds
    (``<column>_sd``, NaN for one seed), the seed count and the mean training seconds."""
    t = _variants(table, variants).with_columns(
        train_seconds=pl.col("model").replace_strict(train_seconds, default=None, return_dtype=pl.Float64))
    keys = ("variant", "dataset", "retriever", "k", "budget")
    rows = []
    for key, group in t.group_by(*keys, maintain_order=True):
        row = dict(zip(keys, key)) | {"seeds": group.height, "presentations": int(group["presentations"].min()),
                                      "queries": int(group["queries"].min()),
                                      "calls_per_query": float(group["calls_per_query"].mean()),
                                      "draws": float(group["draws"].mean()),
                                      "train_seconds": group["train_seconds"].mean()}
        for column in SEED_COLUMNS:
            row[column], row[f"{column}_sd"] = mean_sd(group[column].to_list())
        rows.append(row)
    return pl.DataFrame(rows).sort("dataset", "retriever", "variant", "k", "budget", descending=[False] * 4 + [True])


def paired_tests(per_query: pl.DataFrame, variants: dict[str, str], reference: str | None,
                 tested: tuple[str, ...] = TESTED) -> pl.DataFrame:
    """Each variant against ``reference`` at K = 1 on every dataset, per metric in ``tested``: per-query
    values averaged over each variant's seeds, a paired two-sided Wilcoxon test over the queries both
    scored, Holm-corrected over all comparisons of one metric."""
    schema = {"variant": pl.String, "dataset": pl.String, "retriever": pl.String, "metric": pl.String,
              "p": pl.Float64, "p_holm": pl.Float64}
    if reference is None:
        return pl.DataFrame(schema=schema)
    q = (_variants(per_query.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED)), variants)
         .group_by("variant", "dataset", "retriever", "query_id", maintain_order=True)
         .agg(pl.col(*tested).mean()))
    tests = [paired_against(part, "variant", reference, tested).with_columns(
                 dataset=pl.lit(dataset), retriever=pl.lit(retriever))
             for (dataset, retriever), part in q.group_by("dataset", "retriever", maintain_order=True)]
    if not tests:
        return pl.DataFrame(schema=schema)
    return holm_by_metric(pl.concat(tests)).select(list(schema)).cast(schema)


def _dataset_means(means: pl.DataFrame) -> pl.DataFrame:
    """Per (variant, K) the mean over datasets of the seed means (the sd is the mean of the seed sds; the
    counts are the smallest)."""
    counts = ["seeds", "presentations", "queries"]
    cols = [c for c in means.columns if c not in ("variant", "dataset", "retriever", "k", "budget", *counts)]
    return (means.group_by("variant", "k", "budget", maintain_order=True).agg(pl.col(counts).min(), pl.col(cols).mean())
            .with_columns(dataset=pl.lit(ALL_DATASETS), retriever=pl.lit("")).select(means.columns))


def stability(table: pl.DataFrame, per_query: pl.DataFrame, train_seconds: dict[str, float],
              variants: dict[str, str] | None = None, reference: str | None = None, dev: str | None = None,
              settings: dict[str, dict] | None = None) -> Table:
    """The OC-SFT table: per variant (a training entry's seeds, mean ± sd) and dataset, K = 1 rows (the
    plain scorers) then BSC@K rows; a mean over datasets when there are several; † marks a K = 1
    difference from ``reference`` (OC-SFT) significant after Holm's correction. The held-out ``dev``
    dataset (where λ is chosen, :func:`ocsft_settings`) is left out."""
    variants = variants or {}
    table, per_query = (t.filter(pl.col("dataset") != dev) if dev else t for t in (table, per_query))
    means = seed_means(table, variants, train_seconds)
    if means["dataset"].n_unique() > 1:
        means = pl.concat([means, _dataset_means(means)], how="vertical_relaxed")
    tests = paired_tests(per_query, variants, reference)
    marked = significant(tests, ("variant", "dataset", "metric"))
    ordered = pl.concat([means.filter(pl.col("k") == 1), means.filter(pl.col("k") > 1)])
    view_rows = []
    for r in ordered.iter_rows(named=True):
        name = f"{r['dataset']} · {r['retriever']}" if r["retriever"] else r["dataset"]
        row = {"variant": shown(r["variant"], settings or {}), "dataset": name,
               "K": k_label(r["k"], r["budget"]), "seeds": str(r["seeds"]), "queries (M)": f"{r['queries']} ({r['presentations']})"}
        for column, label in SEED_COLUMNS.items():
            mark = "†" if r["k"] == 1 and (r["variant"], r["dataset"], column) in marked else ""
            row[label] = fmt_sd(r[column], r[f"{column}_sd"], 3) + mark
        row["calls/query"] = fmt(r["calls_per_query"], 1)
        row["training s"] = fmt(r["train_seconds"], 0) if r["train_seconds"] is not None else "–"
        view_rows.append(row)
    data = ordered.join(tests.pivot("metric", index=["variant", "dataset", "retriever"], values="p_holm")
                        .rename({m: f"p_holm_{m}" for m in TESTED if m in tests["metric"].unique().to_list()}),
                        on=["variant", "dataset", "retriever"], how="left") if tests.height else ordered
    notes = (f"Means ± sd over each variant's training seeds (seeds column). K = 1 rows are the plain scorers; "
             "K > 1 rows are BSC@K (scores averaged over K shuffles, then sorted; its presentations are disjoint "
             "groups of K shuffles); ≤K adaptive rows draw those K shuffles one at a time and stop once the top "
             "set of the mean scores settles (posbias.debias.adaptive), their calls/query the draws made. τ-PSI: "
             "(1 − mean pairwise Kendall τ)/2 over M presentations (lower = more stable); retention Jaccard: mean pairwise Jaccard of the sets scoring at least τ*, the threshold with "
             "the best mean canonical set-F1 (higher = more stable); ties: share of exactly tied score pairs; "
             "score sd: spread of a list's scores; top-10 instability: 1 − mean pairwise Jaccard of the top-10 "
             f"sets. † (K = 1): differs from {reference or 'the reference'} in a paired two-sided Wilcoxon test "
             f"over queries (per-query values averaged over seeds), Holm-corrected over the table's comparisons "
             f"of that metric, p < {ALPHA}. Training seconds from the train rule's benchmark (mean over seeds).")
    return Table(data, pl.DataFrame(view_rows), notes)


def ocsft_settings(table: pl.DataFrame, variants: dict[str, str], settings: dict[str, dict],
                   dev: str | None) -> Table:
    """OC-SFT's settings side by side: each trained pointwise variant's method, λ and views N with its
    held-out (``dev`` dataset, canonical order) and test quality and stability (K = 1, means over
    seeds) on the first other dataset the variants were scored on (a run's simulated scorers may come first).
    λ is chosen on held-out quality: among the entries on OC-SFT's λ grid with N = 2 (single order as λ = 0;
    ``settings[v]["grid"]``), the best dev nDCG@10 (ties: the smaller λ) is marked ◀. Without any variant
    scored, one cell says so (a table with no columns is not LaTeX)."""
    means = seed_means(table.filter(pl.col("k") == 1), variants, {})
    at = {(r["variant"], r["dataset"]): r for r in means.iter_rows(named=True)}
    datasets = [d for d in means["dataset"].unique(maintain_order=True).to_list()
                if d != dev and any((v, d) in at for v in settings)]  # where the variants were scored
    test = datasets[0] if datasets else None
    dev_ndcg = {v: at[(v, dev)]["ndcg10_canonical"] for v in settings if (v, dev) in at}
    grid = [v for v, s in settings.items() if v in dev_ndcg and s["grid"] and s["views"] <= 2]
    chosen = min(grid, key=lambda v: (-dev_ndcg[v], settings[v]["lambda"])) if grid else None
    rows = []
    for v, s in sorted(settings.items(), key=lambda kv: (kv[1]["method"], kv[1]["lambda"], kv[1]["views"], kv[0])):
        r = at.get((v, test))
        if r is None:
            continue
        rows.append({"variant": v, "method": s["method"], "lambda": s["lambda"], "views": s["views"],
                     "seeds": r["seeds"], "dev_ndcg10": dev_ndcg.get(v, math.nan), "chosen": v == chosen,
                     **{c: r[c] for c in ("ndcg10_canonical", "ndcg10", "tau_psi", "jaccard")},
                     **{f"{c}_sd": r[f"{c}_sd"] for c in ("tau_psi", "jaccard")}})
    data = pl.DataFrame(rows) if rows else pl.DataFrame(schema={"variant": pl.String})
    view = view_or_none([{
        "variant": r["variant"] + (" ◀" if r["chosen"] else ""), "method": r["method"], "λ": fmt(r["lambda"], 1),
        "N": str(r["views"]), "seeds": str(r["seeds"]), f"dev nDCG@10 ({dev or '–'})": fmt(r["dev_ndcg10"], 3),
        "nDCG@10 canonical": fmt(r["ndcg10_canonical"], 3), "nDCG@10 shuffled": fmt(r["ndcg10"], 3),
        "τ-PSI": fmt_sd(r["tau_psi"], r["tau_psi_sd"], 3),
        "retention Jaccard": fmt_sd(r["jaccard"], r["jaccard_sd"], 3),
    } for r in rows], "OC-SFT settings", "none: no trained pointwise variant (a training.<name> of an OC-SFT "
                                         "family) is scored in this run")
    notes = (f"Test set {test}; K = 1, means (± sd) over seeds. λ is the consistency weight (0: no penalty), N the "
             "views per window; ocsft_no_anchor supervises every view instead of the anchor alone. ◀: the λ "
             f"chosen on held-out quality (canonical nDCG@10 on {dev or 'no dev set'}) among the anchored OC-SFT "
             "entries with N = 2 and single order (λ = 0); its stability is reported, not selected on.")
    return Table(data, view, notes)
