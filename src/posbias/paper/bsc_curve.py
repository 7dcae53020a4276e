"""OC-SFT: BSC@K against K, with the OC-SFT model at K = 1 as reference."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.debias.adaptive import ADAPTIVE, FIXED
from posbias.paper.writers import integer_x, line_styles, min_y_span, panels_with_legend, save_figure


def bsc_figure(stability: pl.DataFrame, path: str | Path, references: list[str] = ()) -> None:
    """nDCG@10, τ-PSI and retention Jaccard of BSC@K against K, one line per model; each model in
    ``references`` (the OC-SFT models) also as a dashed horizontal line at its K = 1 value, the
    comparison OC-SFT makes: K inference passes of a baseline against one pass of the trained model. An
    adaptive budget's row is an open marker at its mean draws (x) in the model's colour."""
    groups = list(stability.sort("k").group_by(["model", "dataset"], maintain_order=True))
    styles = line_styles(len(groups))
    # the legend in its own column beside the panels (30 entries a column), so it never covers a line
    columns = 1 + (len(groups) + sum(m in references for (m, _), _ in groups)) // 30
    fig, axes, legends = panels_with_legend(1, 3, columns, (4, 4.2))
    panels, legend_ax = axes[0], legends[0]
    handles = []
    for ((model, dataset), rows), style in zip(groups, styles):
        group, adaptive = (rows.filter(pl.col("budget") == b) for b in (FIXED, ADAPTIVE))
        for ax, column in zip(panels, ("ndcg10", "tau_psi", "jaccard")):
            line, = ax.plot(group["k"], group[column], ms=4, color=style["color"], marker=style["marker"],
                            label=f"{model} · {dataset}")
            ax.scatter(adaptive["draws"], adaptive[column], s=40, facecolors="none", edgecolors=style["color"])
            if model in references:
                ref = ax.axhline(group.filter(pl.col("k") == 1)[column][0], ls="--", lw=1, color=style["color"],
                                 label=f"{model} · {dataset}, K = 1")
        handles += [line, ref] if model in references else [line]
    integer_x(panels)
    # the K axis spans every K measured (a panel whose points all sit at K = 1 otherwise gets an axis of
    # 0.95 … 1.05), and each metric axis is at least MIN_Y_SPAN high, so that noise never fills a panel
    adaptive = stability.filter(pl.col("budget") == ADAPTIVE)
    ks = stability["k"].to_list() + adaptive["draws"].to_list()
    for ax, title in zip(panels, ("nDCG@10", "τ-PSI (lower = more stable)", "retention Jaccard (higher = more stable)")):
        ax.set(xlabel="K (shuffles averaged)", title=title)
        if ks:
            ax.set_xlim(min(ks) - 0.5, max(max(ks), 2) + 0.5)
        min_y_span(ax)
        ax.grid(alpha=0.3)
    legend_ax.legend(handles=handles, fontsize=6, loc="upper left", frameon=False, ncol=columns,
                     title="open marker: adaptive budget at its mean draws" if adaptive.height else None,
                     title_fontsize=7)
    beyond_one = stability.filter(pl.col("k") > 1)
    if beyond_one.height and beyond_one["tau_psi"].is_nan().all():
        fig.suptitle("τ-PSI and retention Jaccard need two presentations: with these shuffles only K = 1 has them",
                     fontsize=8)
    save_figure(fig, path, 120)
