"""DebiasFirst Figure 4: the relevant passage moved to each input position."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from posbias.paper.seeds import seed_curves
from posbias.paper.writers import line_styles, pyplot, save_figure


def position_curve_figure(curves: pl.DataFrame, training: dict, path: str | Path, debias: str | None = "none") -> None:
    """DebiasFirst Figure 4: nDCG@10 and MRR of the moved relevant passage against its input position, one line
    per model (with ``debias=None`` per debiasing method too) in its own colour and marker. A model trained with
    several seeds is their mean, its band ± sd over seeds (kept within [0, 1]); any other is its mean over
    queries, its band the 95% bootstrap interval over queries. Ticks at the measured positions; the legend
    below the panels, outside the data."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), constrained_layout=True)
    agg = seed_curves(curves, training, debias)
    groups = list(agg.group_by("variant", "dataset", "retriever", "debias", maintain_order=True))
    for ((variant, dataset, retriever, method), g), style in zip(groups, line_styles(len(groups))):
        seeds = int(g["seeds"].max())
        label = (f"{variant} · {dataset} · {retriever}" + ("" if method == "none" else f" · {method}")
                 + (f" ({seeds} seeds, ± sd)" if seeds > 1 else f" ({int(g['queries'].max())} q., 95% CI)"))
        for ax, m in zip(axes, ("target_ndcg10", "target_mrr")):
            if seeds > 1:
                low, high = g[m] - g[f"{m}_sd"], g[m] + g[f"{m}_sd"]
            else:
                low, high = g[f"{m}_lo"], g[f"{m}_hi"]
            ax.plot(g["position"], g[m], ms=4, label=label, **style)
            ax.fill_between(g["position"], np.clip(low.to_numpy(), 0, 1), np.clip(high.to_numpy(), 0, 1),
                            color=style["color"], alpha=0.15, linewidth=0)
    positions = sorted(set(agg["position"].to_list()))
    for ax, what in zip(axes, ("nDCG@10", "MRR")):
        ax.set(xlabel="input position of the relevant passage", ylabel=f"{what} of that passage", ylim=(0, 1.02),
               title=f"{what} of the moved relevant passage")
        ax.set_xticks(positions if len(positions) <= 20 else positions[:: math.ceil(len(positions) / 20)])
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, max(len(labels), 1)), fontsize=7,
               frameon=False)
    save_figure(fig, path, 120)
