"""OC-SFT's pool-replacement analyses as figures: Pool-PSI per scorer, and the variance decomposition
of its kept documents' scores into document, companion coupling and order residual."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from posbias.paper.stats import mean_sd
from posbias.paper.writers import pyplot, save_figure

PARTS = ("document", "companions", "order")  # posbias.metrics.variance_decomposition's parts


def pool_summary(per_query: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    """Per (dataset, retriever, variant): Pool-PSI and each variance part's share of the total (means
    over queries per model, then mean ± sd over the variant's seeds: ``<column>_sd``)."""
    per_model = (per_query.with_columns(variant=pl.col("model").replace_strict(variants, default=pl.col("model")))
                 .with_columns([(pl.col(p) / pl.col("total")).fill_nan(0.0).alias(f"{p}_share") for p in PARTS])
                 .group_by("dataset", "retriever", "variant", "model", maintain_order=True)
                 .agg(pl.len().alias("queries"), pl.col("pool_psi", "total", *(f"{p}_share" for p in PARTS)).mean()))
    rows = []
    for (dataset, retriever, variant), seeds in per_model.group_by("dataset", "retriever", "variant",
                                                                   maintain_order=True):
        row = {"dataset": dataset, "retriever": retriever, "variant": variant, "seeds": seeds.height,
               "queries": int(seeds["queries"].min())}
        for column in ("pool_psi", "total", *(f"{p}_share" for p in PARTS)):
            row[column], row[f"{column}_sd"] = mean_sd(seeds[column].to_list())
        rows.append(row)
    return pl.DataFrame(rows).sort("dataset", "retriever", "variant")


def pool_figures(summary: pl.DataFrame, psi_path: str | Path, variance_path: str | Path) -> None:
    """Pool-PSI (bars, ± sd over seeds) and the variance shares (stacked bars), one group per dataset."""
    plt = pyplot()
    groups = list(summary.group_by("dataset", "retriever", maintain_order=True))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False, constrained_layout=True)
    for ax, ((dataset, retriever), part) in zip(axes[0], groups):
        x = np.arange(part.height)
        ax.bar(x, part["pool_psi"], yerr=part["pool_psi_sd"].fill_nan(0.0), color="tab:blue", capsize=3)
        ax.set_xticks(x, part["variant"], rotation=30, ha="right", fontsize=7)
        ax.set(title=f"{dataset} · {retriever}", ylabel="Pool-PSI (lower = fewer companion effects)")
        ax.grid(axis="y", alpha=0.3)
    save_figure(fig, psi_path, 120)
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False, constrained_layout=True)
    colours = {"document": "tab:green", "companions": "tab:orange", "order": "tab:red"}
    for ax, ((dataset, retriever), part) in zip(axes[0], groups):
        x, bottom = np.arange(part.height), np.zeros(part.height)
        for p in PARTS:
            ax.bar(x, part[f"{p}_share"], bottom=bottom, color=colours[p],
                   label={"companions": "companion coupling", "order": "order residual"}.get(p, p))
            bottom += part[f"{p}_share"].to_numpy()
        ax.set_xticks(x, part["variant"], rotation=30, ha="right", fontsize=7)
        ax.set(title=f"{dataset} · {retriever}", ylabel="share of the kept documents' score variance", ylim=(0, 1))
    axes[0][0].legend(fontsize=7, loc="lower left")
    save_figure(fig, variance_path, 120)
