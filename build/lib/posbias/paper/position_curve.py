"""DebiasFirst Figure 4: the relevant passage moved to each input position."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.paper.seeds import seed_curves
from posbias.paper.writers import integer_x, pyplot, save_figure


def position_curve_figure(curves: pl.DataFrame, training: dict, path: str | Path, debias: str | None = "none") -> None:
    """DebiasFirst Figure 4: nDCG@10 and MRR of the moved relevant passage against its input position,
    one line per model (mean over training seeds, band: ± sd over seeds) and, with ``debias=None``,
    per debiasing method."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    agg = seed_curves(curves, training, debias)
    for (variant, dataset, retriever, method), g in agg.group_by("variant", "dataset", "retriever", "debias",
                                                                   maintain_order=True):
        label = (f"{variant} · {dataset} · {retriever}" + ("" if method == "none" else f" · {method}")
                 + (f" ({g['seeds'].max()} seeds)" if g["seeds"].max() > 1 else ""))
        for ax, m in zip(axes, ("target_ndcg10", "target_mrr")):
            line, = ax.plot(g["position"], g[m], marker="o", ms=3, label=label)
            ax.fill_between(g["position"], (g[m] - g[f"{m}_sd"]).to_numpy(), (g[m] + g[f"{m}_sd"]).to_numpy(),
                            color=line.get_color(), alpha=0.15)
    for ax, what in zip(axes, ("nDCG@10", "MRR")):
        ax.set(xlabel="input position of the relevant passage", ylabel=f"{what} of that passage", ylim=(0, 1.02),
               title=f"Position curve ({what})")
        ax.grid(alpha=0.3)
    integer_x(axes)
    axes[0].legend(fontsize=7, loc="lower left")
    save_figure(fig, path, 120)
