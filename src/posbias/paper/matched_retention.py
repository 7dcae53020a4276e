"""OC-SFT's matched-retention-rate control: is a retention-overlap gain still there when every scorer keeps
the same share of candidates?

A scorer's retention Jaccard is read at its own F1-tuned threshold τ*, so two scorers may keep different
shares of their candidates, and a gain could come from where a threshold sits rather than from stabler
scores (the paper: "匹配保留率后重叠增益依然成立,排除阈值位置混淆"). The control reads every scorer at
the threshold that keeps the same share of its canonical scores, the share of the candidates that are
relevant (:mod:`posbias.stability`'s ``matched_rate``; the rate is our choice, the paper does not state
it), and puts both readings side by side with each variant's difference from the reference.
"""

from __future__ import annotations

import polars as pl

from posbias.debias.adaptive import FIXED
from posbias.paper.seeds import named_variants
from posbias.paper.stability import paired_tests
from posbias.paper.stats import ALPHA, mean_sd, significant
from posbias.paper.writers import Table, fmt, fmt_sd

READINGS = ("jaccard", "jaccard_matched")  # at the F1-tuned τ*, and at the matched rate


def matched_rows(table: pl.DataFrame, variants: dict[str, str], reference: str | None) -> pl.DataFrame:
    """One row per (dataset, retriever, variant) of the plain scorers (K = 1): the share kept at τ* and
    both Jaccard readings (mean and sd over the variant's seeds), the matched rate, and each reading's
    difference from ``reference``'s on the same dataset (NaN where the reference is absent)."""
    t = named_variants(table.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED)), variants)
    rows = []
    for (dataset, retriever, variant), seeds in t.group_by("dataset", "retriever", "variant", maintain_order=True):
        row = {"dataset": dataset, "retriever": retriever, "variant": variant, "seeds": seeds.height,
               "matched_rate": float(seeds["matched_rate"].mean())}
        for column in ("retained", *READINGS):
            row[column], row[f"{column}_sd"] = mean_sd(seeds[column].to_list())
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    data = pl.DataFrame(rows)
    ref = (data.filter(pl.col("variant") == reference)
           .select("dataset", "retriever", *(pl.col(c).alias(f"{c}_reference") for c in READINGS)))
    return (data.join(ref, on=["dataset", "retriever"], how="left")
            .with_columns(**{f"{c}_gain": pl.col(c) - pl.col(f"{c}_reference") for c in READINGS})
            .drop(*(f"{c}_reference" for c in READINGS)))


def matched_retention(table: pl.DataFrame, per_query: pl.DataFrame, variants: dict[str, str] | None = None,
                      reference: str | None = None, dev: str | None = None) -> Table:
    """The control table: per dataset and variant (K = 1, the held-out ``dev`` dataset left out), the share
    of candidates kept at the F1-tuned τ*, the Jaccard there and at the matched rate, each with its
    difference from ``reference``; † marks a difference significant in a paired two-sided Wilcoxon test
    over queries, Holm-corrected over the table's comparisons of that reading."""
    variants = variants or {}
    table, per_query = (t.filter(pl.col("dataset") != dev) if dev else t for t in (table, per_query))
    data = matched_rows(table, variants, reference)
    tests = paired_tests(per_query, variants, reference, READINGS)
    marked = significant(tests, ("variant", "dataset", "metric"))
    view = []
    for r in data.iter_rows(named=True):
        row = {"dataset": f"{r['dataset']} · {r['retriever']}", "variant": r["variant"], "seeds": str(r["seeds"]),
               "kept at τ*": fmt_sd(r["retained"], r["retained_sd"], 3),
               "matched rate": fmt(r["matched_rate"], 3)}
        for column, label in (("jaccard", "Jaccard at τ*"), ("jaccard_matched", "Jaccard at matched rate")):
            mark = "†" if (r["variant"], r["dataset"], column) in marked else ""
            row[label] = fmt_sd(r[column], r[f"{column}_sd"], 3)
            row[f"Δ {label}"] = ("–" if r["variant"] == reference else fmt(r[f"{column}_gain"], 3)) + mark
        view.append(row)
    notes = ("The matched-retention-rate control (OC-SFT). Jaccard at τ*: mean pairwise Jaccard of the sets "
             "scoring at least τ*, the threshold with the best mean canonical set-F1 (each scorer its own, so the "
             "share of candidates kept, 'kept at τ*', differs between scorers). Jaccard at matched rate: the same "
             "with the threshold that keeps the same share of every scorer's canonical candidates, the share that "
             f"is relevant ('matched rate'; our choice of rate). Δ: the variant's value minus {reference or 'the reference'}'s; "
             "a gain that holds at the matched rate is not an artefact of where a threshold sits. † differs from the "
             "reference in a paired two-sided Wilcoxon test over queries (per-query values averaged over seeds), "
             f"Holm-corrected over the table's comparisons of that reading, p < {ALPHA}.")
    return Table(data, pl.DataFrame(view), notes)
