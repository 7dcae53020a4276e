"""OC-SFT: BSC@K against K, with the OC-SFT model at K = 1 as reference."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.debias.adaptive import ADAPTIVE, FIXED
from posbias.paper.writers import integer_x, pyplot, save_figure


def bsc_figure(stability: pl.DataFrame, path: str | Path, references: list[str] = ()) -> None:
    """nDCG@10, τ-PSI and retention Jaccard of BSC@K against K, one line per model; each model in
    ``references`` (the OC-SFT models) also as a dashed horizontal line at its K = 1 value, the
    comparison OC-SFT makes: K inference passes of a baseline against one pass of the trained model. An
    adaptive budget's row is an open marker at its mean draws (x) in the model's colour."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    for (model, dataset), rows in stability.sort("k").group_by(["model", "dataset"], maintain_order=True):
        group, adaptive = (rows.filter(pl.col("budget") == b) for b in (FIXED, ADAPTIVE))
        for ax, column in zip(axes, ("ndcg10", "tau_psi", "jaccard")):
            line, = ax.plot(group["k"], group[column], marker="o", ms=3, label=f"{model} · {dataset}")
            ax.scatter(adaptive["draws"], adaptive[column], s=40, facecolors="none", edgecolors=line.get_color())
            if model in references:
                ax.axhline(group.filter(pl.col("k") == 1)[column][0], ls="--", lw=1, color=line.get_color(),
                           label=f"{model} · {dataset}, K = 1")
    integer_x(axes)
    for ax, title in zip(axes, ("nDCG@10", "τ-PSI (lower = more stable)", "retention Jaccard (higher = more stable)")):
        ax.set(xlabel="K (shuffles averaged; open: adaptive, at its mean draws)", title=title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    save_figure(fig, path, 120)
