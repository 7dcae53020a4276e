"""OC-SFT's teachers compared (its Figures 9 and 11): each silver-label teacher's label quality and label
order consistency (silver-β) against the quality and stability of the student it trains.

The paper: silver-β and label quality correlate with the student's quality at −0.852 and +0.812, and with
each other at −0.528, so a teacher should be judged on both. Here a comparison is one group of
:func:`posbias.config.teacher_study`: the variants one method trains from one base on one training set, where
at least two teachers label that set. Per student: its teacher's label quality (nDCG@10 of its anchor-view
labels, :func:`posbias.silver.label_quality`) and silver-β (the τ-PSI of its labels over its T + 1 views,
:func:`posbias.silver.label_consistency`), and the student's nDCG@10 over shuffled presentations, τ-PSI and
retention Jaccard (K = 1, means over seeds and test datasets). Per group, Pearson's r of each pair the paper
reports and of silver-β against the student's τ-PSI, over the teachers (NaN with fewer than three).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from posbias.debias.adaptive import FIXED
from posbias.paper.seeds import named_variants, on_shared_datasets
from posbias.paper.writers import Table, fmt, panels_by_group, save_figure, view_or_none

GROUP = ("data", "method", "base")
# The correlations reported: (x, y, label); the paper's values for the first three.
PAIRS = (("silver_beta", "ndcg10", "silver-β × student nDCG@10"),
         ("label_ndcg10", "ndcg10", "label quality × student nDCG@10"),
         ("silver_beta", "label_ndcg10", "silver-β × label quality"),
         ("silver_beta", "tau_psi", "silver-β × student τ-PSI"))
PAPER_R = {"silver-β × student nDCG@10": -0.852, "label quality × student nDCG@10": 0.812,
           "silver-β × label quality": -0.528}


def teacher_rows(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict], variants: dict[str, str],
                 dev: str | None = None) -> pl.DataFrame:
    """One row per student of ``study``: its group, teacher, the teacher's label quality and silver-β (from the
    silver job with the most shuffles), and the student's K = 1 quality and stability (NaN where not measured)."""
    plain = named_variants(stability.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED)
                                            & (pl.col("debias") == "none") & (pl.col("dataset") != (dev or ""))),
                           variants)
    plain = on_shared_datasets(plain, study, GROUP)
    rows = []
    for s in study:
        labels = (silver_stats.filter((pl.col("dataset") == s["data"]) & (pl.col("teacher") == s["teacher"]))
                  .sort("shuffles", descending=True))
        own = plain.filter((pl.col("variant") == s["variant"])
                           & (pl.col("group_key") == " · ".join(str(s[k]) for k in GROUP)))
        row = {k: s[k] for k in (*GROUP, "variant", "teacher")} | {
            "seeds": own["model"].n_unique(), "datasets": own["shared"][0] if own.height else ""}
        for column in ("label_ndcg10", "silver_beta", "label_sd"):
            row[column] = float(labels[column][0]) if labels.height else math.nan
        for column in ("ndcg10", "tau_psi", "jaccard"):
            row[column] = float(own[column].mean()) if own.height else math.nan
        rows.append(row)
    return pl.DataFrame(rows)


def pearson(x: list[float], y: list[float]) -> float:
    """Pearson's r of paired values (scipy), NaN with fewer than three pairs or a constant side."""
    from scipy.stats import pearsonr

    pairs = [(a, b) for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))]
    if len(pairs) < 3 or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
        return math.nan
    return float(pearsonr([a for a, _ in pairs], [b for _, b in pairs]).statistic)


def correlations(rows: pl.DataFrame) -> pl.DataFrame:
    """Per group, each pair of :data:`PAIRS`: the number of teachers and Pearson's r over them (a teacher
    with several students counts once, at their mean)."""
    out = []
    if rows.is_empty():
        return pl.DataFrame(schema={**{k: pl.String for k in GROUP}, "pair": pl.String, "teachers": pl.Int64,
                                    "r": pl.Float64, "paper_r": pl.Float64})
    for key, group in rows.group_by(*GROUP, maintain_order=True):
        per_teacher = group.group_by("teacher", maintain_order=True).agg(
            pl.col("label_ndcg10", "silver_beta", "ndcg10", "tau_psi").mean())
        for x, y, label in PAIRS:
            out.append(dict(zip(GROUP, key)) | {"pair": label, "teachers": per_teacher.height,
                                                "r": pearson(per_teacher[x].to_list(), per_teacher[y].to_list()),
                                                "paper_r": PAPER_R.get(label, math.nan)})
    return pl.DataFrame(out)


def teachers(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict], variants: dict[str, str],
             dev: str | None = None) -> Table:
    """The teacher table: every student of the study with its teacher's label quality and silver-β and its own
    quality and stability, then each group's correlations beside the paper's."""
    rows = teacher_rows(stability, silver_stats, study, variants, dev)
    corr = correlations(rows)
    columns = ("training set · method · base", "student", "teacher", "test datasets", "label nDCG@10", "silver-β",
               "student nDCG@10", "student τ-PSI", "student Jaccard", "Pearson r", "paper's r")
    view = [dict(zip(columns, (f"{r['data']} · {r['method']} · {r['base']}", r["variant"], r["teacher"], r["datasets"],
                               *(fmt(r[c], 3) for c in ("label_ndcg10", "silver_beta", "ndcg10", "tau_psi", "jaccard")),
                               "", "")))
            for r in rows.iter_rows(named=True)]
    view += [dict(zip(columns, (f"{r['data']} · {r['method']} · {r['base']}", f"{r['pair']} (n = {r['teachers']} teachers)",
                                "", "", "", "", "", "", "", fmt(r["r"], 3),
                                fmt(r["paper_r"], 3) if not math.isnan(r["paper_r"]) else "")))
             for r in corr.iter_rows(named=True)]
    notes = ("OC-SFT's teacher comparison (its Figures 9 and 11). label nDCG@10: the teacher's anchor-view silver "
             "labels ranked against the training queries' qrels (label quality; our reading). silver-β: τ-PSI of "
             "the teacher's labels over its T + 1 views (label order consistency, lower = more consistent). The "
             "student's nDCG@10 (shuffled presentations), τ-PSI and retention Jaccard are K = 1 means over its "
             "seeds and the test datasets every student of its group was measured on (test datasets), so no "
             "teacher's students are averaged over easier collections than another's. Pearson r over a group's teachers (a teacher's students at their mean; "
             "– with fewer than three teachers); the paper reports −0.852 (silver-β × student quality), +0.812 "
             "(label quality × student quality) and −0.528 (silver-β × label quality) over its own teachers.")
    return Table(rows.join(corr.pivot("pair", index=list(GROUP), values="r"), on=list(GROUP), how="left")
                 if corr.height else rows,
                 view_or_none(view, "teachers compared", "none: no students of one method, base and training set "
                                                         "learn from two teachers in this config "
                                                         "(posbias.config.teacher_study)"), notes)


def teachers_figure(stability: pl.DataFrame, silver_stats: pl.DataFrame, study: list[dict],
                    variants: dict[str, str], dev: str | None, path: str | Path) -> None:
    """Per group two panels: the student's nDCG@10 against its teacher's silver-β, and against its label
    quality, one point per student labelled by teacher, Pearson's r in the title."""
    rows = teacher_rows(stability, silver_stats, study, variants, dev)
    corr = correlations(rows)
    fig, groups = panels_by_group(rows, GROUP)
    for key, part, (beta_ax, quality_ax) in groups:
        r = {p: v for p, v in corr.filter(pl.all_horizontal(pl.col(k) == v for k, v in zip(GROUP, key)))
             .select("pair", "r").iter_rows()}
        for ax, column, label in ((beta_ax, "silver_beta", "silver-β × student nDCG@10"),
                                  (quality_ax, "label_ndcg10", "label quality × student nDCG@10")):
            ax.scatter(part[column], part["ndcg10"], s=30)
            for t in part.iter_rows(named=True):
                ax.annotate(t["teacher"], (t[column], t["ndcg10"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
            ax.set(xlabel="teacher silver-β (label τ-PSI)" if column == "silver_beta" else "teacher label nDCG@10",
                   ylabel="student nDCG@10", title=f"{' · '.join(key)}: r = {fmt(r.get(label, math.nan), 3)}")
            ax.grid(alpha=0.3)
    save_figure(fig, path, 120)
