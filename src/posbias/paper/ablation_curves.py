"""DebiasFirst Figure 6: position curves of the objective × augmentation ablations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from posbias.config import variant_of
from posbias.paper.seeds import seed_curves
from posbias.paper.writers import integer_x, pyplot, save_figure
from posbias.training import families


def ablation_curves_figure(curves: pl.DataFrame, training: dict, path: str | Path) -> None:
    """DebiasFirst Figure 6: position curves of the trained listwise models, one panel per augmentation,
    one line per objective (mean over seeds), the variance across positions in the legend."""
    plt = pyplot()
    agg = seed_curves(curves, training)
    runs = {variant_of(training, name): run for name, run in training.items()
            if families.of(run["method"]).augmented}
    augs = sorted({run["aug"] for run in runs.values()}) or ["noaug"]
    fig, axes = plt.subplots(1, len(augs), figsize=(5 * len(augs), 4), constrained_layout=True, squeeze=False)
    for ax, aug in zip(axes[0], augs):
        for variant, run in runs.items():
            g = agg.filter((pl.col("variant") == variant) & (run["aug"] == aug))
            for (dataset, retriever), gg in g.group_by("dataset", "retriever", maintain_order=True):
                variance = float(np.var(gg["target_ndcg10"].to_numpy()))
                ax.plot(gg["position"], gg["target_ndcg10"], marker="o", ms=3,
                        label=f"{run['method']} ({variant}, {dataset}): var {variance:.3f}")
        ax.set(xlabel="input position of the relevant passage", ylabel="nDCG@10 of that passage", ylim=(0, 1.02),
               title=aug)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    integer_x(axes[0])
    save_figure(fig, path, 120)
