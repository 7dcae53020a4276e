"""DebiasFirst Figure 5: training- vs inference-time debiasing, PermSC against K."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.paper.seeds import per_query, with_variants
from posbias.paper.writers import integer_x, pyplot, save_figure


def _permsc_k(debias: str) -> int | None:
    return 1 if debias == "none" else int(debias.split("@")[1]) if debias.startswith("permsc@") else None


def inference_vs_training_figure(metrics: pl.DataFrame, training: dict, path: str | Path) -> pl.DataFrame:
    """DebiasFirst Figure 5: nDCG@10 per shuffle seed of every model with and without PermSC (left), and
    nDCG@10 under shuffled orders against PermSC's number of permutations K (K = 1: no PermSC; right),
    the peak marked. Means over queries and training seeds. Returns the plotted numbers."""
    q = with_variants(per_query(metrics).filter(pl.col("order").str.starts_with("shuffled-")), training)
    q = q.with_columns(k=pl.col("debias").map_elements(_permsc_k, return_dtype=pl.Int64)).drop_nulls("k")
    per_seed = (q.with_columns(shuffle=pl.col("order").str.split("-").list.get(1).cast(pl.Int64))
                .group_by("variant", "dataset", "retriever", "debias", "k", "shuffle").agg(pl.col("value").mean())
                .sort("variant", "dataset", "retriever", "k", "shuffle"))
    by_k = (per_seed.group_by("variant", "dataset", "retriever", "k").agg(pl.col("value").mean())
            .sort("variant", "dataset", "retriever", "k"))
    has_permsc = by_k.group_by("variant", "dataset", "retriever").agg(pl.col("k").max() > 1).filter(pl.col("k"))
    per_seed = per_seed.join(has_permsc.drop("k"), on=["variant", "dataset", "retriever"])
    by_k = by_k.join(has_permsc.drop("k"), on=["variant", "dataset", "retriever"])
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), constrained_layout=True)
    for (variant, dataset, retriever, debias), g in per_seed.group_by("variant", "dataset", "retriever", "debias",
                                                                        maintain_order=True):
        axes[0].plot(g["shuffle"], g["value"], marker="o", ms=3, ls="-" if debias == "none" else "--",
                     label=f"{variant} · {dataset}" + ("" if debias == "none" else f" + {debias}"))
    for (variant, dataset, retriever), g in by_k.group_by("variant", "dataset", "retriever", maintain_order=True):
        line, = axes[1].plot(g["k"], g["value"], marker="o", ms=3, label=f"{variant} · {dataset}")
        peak = g.sort("value", descending=True).row(0, named=True)
        axes[1].scatter([peak["k"]], [peak["value"]], s=80, facecolors="none", edgecolors=line.get_color())
    axes[0].set(xlabel="shuffle seed", ylabel="nDCG@10", title="Per shuffle seed: training- vs inference-time debiasing")
    axes[1].set(xlabel="PermSC permutations K (1 = none)", ylabel="nDCG@10, shuffled orders",
                title="PermSC against K (circle: peak)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    integer_x(axes)
    save_figure(fig, path, 120)
    return by_k
