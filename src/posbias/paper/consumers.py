"""OC-SFT's consumers beyond passage reranking: each scorer's decisions (QA answers and verdicts,
response preferences) and how often they flip across presentations, per dataset."""

from __future__ import annotations

import math

import polars as pl

from posbias import consumers
from posbias.paper.seeds import named_variants
from posbias.paper.stats import ALPHA, holm, mean_sd, paired_pvalue
from posbias.paper.writers import Table, fmt_sd

VALUES = ("quality", "flip", "verdict_flip", "retained")
TESTED = ("quality", "flip")  # paired over queries against the reference variant


def decisions_table(per_query: pl.DataFrame, variants: dict[str, str], references: list[str]) -> Table:
    """Per dataset (its consumer's columns) and variant: each value's mean over queries, then mean ± sd
    over the variant's seeds; † marks a difference from the dataset's OC-SFT variant (the first of
    ``references`` evaluated there) in a paired two-sided Wilcoxon test over queries (per-query values
    averaged over seeds), Holm-corrected over the table's comparisons of that value."""
    q = named_variants(per_query, variants)
    by_variant = q.group_by("variant", "dataset", "retriever", "query_id", maintain_order=True).agg(
        pl.col(*TESTED).mean())
    tests, reference_of = [], {}
    for (dataset, retriever), part in by_variant.group_by("dataset", "retriever", maintain_order=True):
        present = set(part["variant"].to_list())
        reference = reference_of[dataset] = next((r for r in references if r in present), None)
        ref = part.filter(pl.col("variant") == reference)
        for variant in part["variant"].unique(maintain_order=True).to_list():
            if variant == reference or ref.height == 0:
                continue
            both = ref.join(part.filter(pl.col("variant") == variant), on="query_id", suffix="_other").drop_nans()
            tests += [{"variant": variant, "dataset": dataset, "retriever": retriever, "metric": m,
                       "p": paired_pvalue(both[m].to_numpy(), both[f"{m}_other"].to_numpy()) if both.height else math.nan}
                      for m in TESTED]
    for metric in TESTED:
        rows = [t for t in tests if t["metric"] == metric]
        for t, p in zip(rows, holm([t["p"] for t in rows])):
            t["p_holm"] = p
    significant = {(t["variant"], t["dataset"], t["metric"]) for t in tests
                   if not math.isnan(t["p_holm"]) and t["p_holm"] < ALPHA}
    per_model = q.group_by("variant", "model", "dataset", "retriever", "consumer", maintain_order=True).agg(
        pl.len().alias("queries"), pl.col("presentations").min(), pl.col(*VALUES).mean())
    rows, view = [], []
    for (variant, dataset, retriever, consumer), seeds in per_model.group_by(
            "variant", "dataset", "retriever", "consumer", maintain_order=True):
        row = {"dataset": dataset, "retriever": retriever, "consumer": consumer, "variant": variant,
               "seeds": seeds.height, "queries": int(seeds["queries"].min()),
               "presentations": int(seeds["presentations"].min())}
        for value in VALUES:
            row[value], row[f"{value}_sd"] = mean_sd(seeds[value].to_list())
        row |= {f"p_holm_{t['metric']}": t["p_holm"] for t in tests
                if (t["variant"], t["dataset"]) == (variant, dataset)}
        rows.append(row)
    rows.sort(key=lambda r: (r["consumer"], r["dataset"], r["variant"]))
    for r in rows:
        columns = consumers.get(r["consumer"]).columns
        mark = " (reference)" if r["variant"] == reference_of.get(r["dataset"]) else ""
        cells = {"consumer": consumers.get(r["consumer"]).label, "dataset": f"{r['dataset']} · {r['retriever']}",
                 "variant": r["variant"] + mark, "seeds": str(r["seeds"]), "queries (M)": f"{r['queries']} ({r['presentations']})"}
        for value in VALUES:
            mark = "†" if (r["variant"], r["dataset"], value) in significant else ""
            label = columns.get(value)
            cells[value] = (f"{label}: " + fmt_sd(r[value], r[f"{value}_sd"], 3) + mark) if label else "–"
        view.append(cells)
    notes = ("Each pointwise scorer's decisions over M shuffled presentations, per query, then means ± sd over "
             "seeds. Multi-document QA: the retention set (scores ≥ τ*, the threshold with the best canonical "
             "set-F1) read by the frozen reader in a fixed order; accuracy = exact match over presentations; "
             "answer / verdict flip = 1 − the share of presentations giving the most frequent answer / verdict. "
             "Response ranking: nDCG@1 over presentations; pair flip = the same for the (chosen = top-scored, "
             "rejected = bottom-scored) pair, selection flip for the top-scored response alone. † differs from the dataset's OC-SFT variant (reference; paired "
             f"two-sided Wilcoxon over queries, Holm-corrected per column, p < {ALPHA}).")
    data = pl.DataFrame(rows) if rows else pl.DataFrame(schema={"dataset": pl.String})
    return Table(data, pl.DataFrame(view), notes)
