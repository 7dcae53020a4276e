"""OC-SFT over several base models: its retention-Jaccard gain over single order per (base, collection)
cell, pooled over all cells (the OC-SFT paper's Figure 3: "198 个 cell 的 pooled 重叠增益"), and whether its
τ-PSI is the lowest of every objective trained from that base ("12 个基座上 τ-PSI 全部最低")."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.paper.seeds import named_variants
from posbias.paper.writers import Table, fmt, pyplot, save_figure

CELL_SCHEMA = {"base": pl.String, "data": pl.String, "dataset": pl.String, "retriever": pl.String,
               "jaccard_gain": pl.Float64, "tau_psi_drop": pl.Float64, "objectives": pl.Int64, "lowest": pl.Boolean}


def base_cells(stability: pl.DataFrame, pairs: list[dict[str, str]], variants: dict[str, str],
               dev: str | None = None) -> pl.DataFrame:
    """One row per (base, training data, collection) where both variants of a pair (posbias.config.base_pairs)
    were evaluated at K = 1: OC-SFT's retention Jaccard minus single order's (each a mean over the variant's
    seeds; > 0: OC-SFT keeps the same documents more often) and single order's τ-PSI minus OC-SFT's
    (> 0: OC-SFT's rankings move less); ``objectives``: how many of the base's objectives (the pair's
    ``objectives``, OC-SFT among them) were evaluated on the cell, ``lowest``: whether OC-SFT's τ-PSI is the
    lowest of theirs (ties count as lowest). The held-out ``dev`` dataset is left out."""
    k1 = stability.filter(pl.col("k") == 1)
    if dev:
        k1 = k1.filter(pl.col("dataset") != dev)
    means = (named_variants(k1, variants)
             .group_by("variant", "dataset", "retriever", maintain_order=True).agg(pl.col("jaccard", "tau_psi").mean()))
    rows = []
    for pair in pairs:
        ocsft = means.filter(pl.col("variant") == pair["ocsft"]).drop("variant")
        single = means.filter(pl.col("variant") == pair["single"]).drop("variant")
        both = ocsft.join(single, on=["dataset", "retriever"], suffix="_single").sort("dataset", "retriever")
        for r in both.iter_rows(named=True):
            others = means.filter(pl.col("variant").is_in(pair.get("objectives", [pair["ocsft"], pair["single"]]))
                                  & (pl.col("dataset") == r["dataset"]) & (pl.col("retriever") == r["retriever"]))
            rows.append({"base": pair["base"], "data": pair["data"], "dataset": r["dataset"],
                         "retriever": r["retriever"], "jaccard_gain": r["jaccard"] - r["jaccard_single"],
                         "tau_psi_drop": r["tau_psi_single"] - r["tau_psi"], "objectives": others.height,
                         "lowest": bool(r["tau_psi"] <= others["tau_psi"].min())})
    return pl.DataFrame(rows, schema=CELL_SCHEMA)


def bases_figure(cells: pl.DataFrame, path: str | Path) -> None:
    """Two panels, one column per base: each cell's retention-Jaccard gain and τ-PSI drop of OC-SFT over
    single order as dots, the base's mean as a bar, and the mean pooled over every cell as a dashed line
    (its value and cell count in the title)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    bases = cells["base"].unique(maintain_order=True).to_list()
    for ax, column, title in zip(axes, ("jaccard_gain", "tau_psi_drop"),
                                 ("retention-Jaccard gain over single order", "τ-PSI drop from single order")):
        for x, base in enumerate(bases):
            values = cells.filter(pl.col("base") == base)[column]
            ax.bar(x, values.mean(), color="tab:blue", alpha=0.35, width=0.6)
            offsets = [(i - (len(values) - 1) / 2) * min(0.5 / max(len(values), 1), 0.08) for i in range(len(values))]
            ax.scatter([x + o for o in offsets], values.to_list(), s=10, color="tab:blue", zorder=3)
        if cells.height:
            pooled = cells[column].mean()
            ax.axhline(pooled, ls="--", lw=1, color="black")
            title += f"\npooled {pooled:+.3f} over {cells.height} cells"
        else:
            title += "\nno base with both OC-SFT and single order evaluated"
        ax.axhline(0, lw=0.6, color="grey")
        ax.set_xticks(range(len(bases)), bases, rotation=30, ha="right", fontsize=8)
        ax.set(title=title, xlabel="base model (one dot per collection)")
        ax.grid(alpha=0.3, axis="y")
    save_figure(fig, path, 120)


def bases_table(cells: pl.DataFrame) -> Table:
    """The figure's numbers: per base, the mean gain over its collections and the cell count, then the
    mean pooled over all cells."""
    per_base = (cells.group_by("base", maintain_order=True)
                .agg(pl.len().alias("cells"), pl.col("jaccard_gain", "tau_psi_drop").mean(),
                     pl.col("lowest").sum().cast(pl.Int64)))
    pooled = pl.DataFrame({"base": ["pooled"], "cells": [cells.height],
                           "jaccard_gain": [cells["jaccard_gain"].mean()], "tau_psi_drop": [cells["tau_psi_drop"].mean()],
                           "lowest": [int(cells["lowest"].sum())]}, schema=per_base.schema)
    data = pl.concat([per_base, pooled])
    columns = ("base", "cells", "retention-Jaccard gain", "τ-PSI drop", "τ-PSI lowest of its base's objectives")
    view = pl.DataFrame([dict(zip(columns, (r["base"], str(r["cells"]), fmt(r["jaccard_gain"], 3),
                                            fmt(r["tau_psi_drop"], 3), f"{r['lowest']}/{r['cells']} cells")))
                         for r in data.iter_rows(named=True)], schema=dict.fromkeys(columns, pl.String))
    notes = ("A cell is one (base model, collection) where OC-SFT and single order trained from that base on the "
             "same data were both evaluated at K = 1. Gain: OC-SFT's retention Jaccard minus single order's; τ-PSI "
             "drop: single order's minus OC-SFT's; each variant's value a mean over its seeds. Positive: OC-SFT "
             "more stable. The pooled row is the mean over all cells. τ-PSI lowest: the cells where OC-SFT's τ-PSI is "
             "the lowest of every pointwise objective trained from that base on the same data (the paper: \"12 个"
             "基座上 τ-PSI 全部最低\").")
    return Table(data, view, notes)
