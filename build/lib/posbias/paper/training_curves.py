"""The training loss curve of one trained model."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias.paper.writers import pyplot, save_figure


def loss_figure(curve: pl.DataFrame, path: str | Path, title: str) -> None:
    """Training loss (total and its logged parts) against the optimiser step."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), constrained_layout=True)
    for column in ("loss", "rank_loss", "lm_loss", "supervised_loss", "consistency_loss"):
        if curve.height and curve[column].is_not_nan().any():
            ax.plot(curve["step"], curve[column], marker=".", label=column)
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path, 110)
