"""OC-SFT's pool-replacement analyses as figures: Pool-PSI per scorer, and the variance decomposition
of its kept documents' scores into document, companion coupling and order residual."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from posbias.paper.seeds import named_variants
from posbias.paper.stats import mean_sd
from posbias.paper.writers import pyplot, save_figure

PARTS = ("document", "companions", "order")  # posbias.metrics.variance_decomposition's parts
SUMMARY_COLUMNS = ("pool_psi", "total", *PARTS, "companion_coupling", "slot_effect", "document_share",
                   "residual_vs_reference")


def pool_summary(per_query: pl.DataFrame, variants: dict[str, str], reference: str | None = None) -> pl.DataFrame:
    """Per (dataset, retriever, variant): Pool-PSI, the variance parts and their shares (per model
    the parts' means over queries, then mean ± sd over the variant's seeds: ``<column>_sd``).

    OC-SFT states its decomposition as shares of the *within-document* score variance
    ("伴随耦合占 off-the-shelf 文档内分数方差的 82.5%、槽位效应 16.9%"): ``companion_coupling`` and
    ``slot_effect`` are companions and order over their sum (the variance left once each document's
    mean is taken out), and ``document_share`` the document part's share of the total. Its "OC-SFT 把
    残差方差压到原始的 3.2%" is ``residual_vs_reference``: the model's order-residual variance over
    that of ``reference`` (the off-the-shelf scorer, a model of the design) on the same dataset and
    retriever; NaN without a reference. Shares are of the means over queries (reading: the paper
    does not say whether it pools before dividing; pooled parts keep near-zero queries from
    dominating)."""
    per_model = (named_variants(per_query, variants)
                 .group_by("dataset", "retriever", "variant", "model", maintain_order=True)
                 .agg(pl.len().alias("queries"), pl.col("pool_psi", "total", *PARTS).mean()))
    within = pl.col("companions") + pl.col("order")
    per_model = per_model.with_columns(
        companion_coupling=_share(pl.col("companions"), within), slot_effect=_share(pl.col("order"), within),
        document_share=_share(pl.col("document"), pl.col("total")))
    if reference is not None:
        if reference not in per_model["model"]:
            raise ValueError(f"ocsft.pool.reference: {reference!r} is not a model of the pool design "
                             f"({', '.join(per_model['model'].unique().sort())})")
        base = (per_model.filter(pl.col("model") == reference)
                .select("dataset", "retriever", pl.col("order").alias("reference_order")))
        per_model = (per_model.join(base, on=["dataset", "retriever"], how="left", maintain_order="left")
                     .with_columns(residual_vs_reference=pl.col("order") / pl.col("reference_order")))
    else:
        per_model = per_model.with_columns(residual_vs_reference=pl.lit(float("nan")))
    rows = []
    for (dataset, retriever, variant), seeds in per_model.group_by("dataset", "retriever", "variant",
                                                                   maintain_order=True):
        row = {"dataset": dataset, "retriever": retriever, "variant": variant, "seeds": seeds.height,
               "queries": int(seeds["queries"].min())}
        for column in SUMMARY_COLUMNS:
            row[column], row[f"{column}_sd"] = mean_sd(seeds[column].to_list())
        rows.append(row)
    return pl.DataFrame(rows).sort("dataset", "retriever", "variant")


def _share(part: pl.Expr, whole: pl.Expr) -> pl.Expr:
    """part / whole, 0 where the whole is 0 (a scorer with nothing to split)."""
    return pl.when(whole > 0).then(part / whole).otherwise(0.0)


def pool_psi_figure(summary: pl.DataFrame, path: str | Path) -> None:
    """Pool-PSI (bars, ± sd over seeds), one group per dataset."""
    plt = pyplot()
    groups = list(summary.group_by("dataset", "retriever", maintain_order=True))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False, constrained_layout=True)
    for ax, ((dataset, retriever), part) in zip(axes[0], groups):
        x = np.arange(part.height)
        ax.bar(x, part["pool_psi"], yerr=part["pool_psi_sd"].fill_nan(0.0), color="tab:blue", capsize=3)
        ax.set_xticks(x, part["variant"], rotation=30, ha="right", fontsize=7)
        ax.set(title=f"{dataset} · {retriever}", ylabel="Pool-PSI (lower = fewer companion effects)")
        ax.grid(axis="y", alpha=0.3)
    save_figure(fig, path, 120)


def variance_figure(summary: pl.DataFrame, path: str | Path) -> None:
    """The within-document variance shares (stacked bars, each labelled with its residual as a multiple
    of the reference's), one group per dataset."""
    plt = pyplot()
    groups = list(summary.group_by("dataset", "retriever", maintain_order=True))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False, constrained_layout=True)
    colours = {"companion_coupling": "tab:orange", "slot_effect": "tab:red"}
    for ax, ((dataset, retriever), part) in zip(axes[0], groups):
        x, bottom = np.arange(part.height), np.zeros(part.height)
        for share, colour in colours.items():
            ax.bar(x, part[share], bottom=bottom, color=colour, label=share.replace("_", " "))
            bottom += part[share].to_numpy()
        for i, ratio in enumerate(part["residual_vs_reference"]):
            if ratio == ratio:  # not NaN: the residual as a multiple of the off-the-shelf scorer's
                ax.annotate(f"{ratio:.3g}×", (i, bottom[i]), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(x, part["variant"], rotation=30, ha="right", fontsize=7)
        ax.set(title=f"{dataset} · {retriever}", ylabel="share of within-document score variance", ylim=(0, 1.1))
    axes[0][0].legend(fontsize=7, loc="lower left")
    save_figure(fig, path, 120)
