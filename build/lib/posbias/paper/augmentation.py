"""Where the teacher's best passages sit in the input before and after augmentation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from posbias.paper.writers import Table, fmt, pyplot, save_figure


def augmentation_table(tables: dict[str, pl.DataFrame]) -> Table:
    """The share of teacher-best (gold rank 1) passages at each input position (1-based), per variant."""
    best = {v: t.filter(pl.col("gold_rank") == 0).sort("input_position") for v, t in tables.items()}
    positions = next(iter(best.values()))["input_position"].to_list()
    shares = {v: [t["count"][i] / t["count"].sum() if t["count"].sum() else math.nan for i in range(len(positions))]
              for v, t in best.items()}
    data = pl.DataFrame({"position": [p + 1 for p in positions], **shares})
    view = pl.DataFrame({"position": [str(p + 1) for p in positions],
                         **{v: [fmt(x, 3) for x in column] for v, column in shares.items()}})
    notes = ("Share of instances whose teacher-ranked first passage sits at each input position; "
             "position-aware augmentation should make it uniform.")
    return Table(data, view, notes)


def augmentation_figure(tables: dict[str, pl.DataFrame], path: str | Path) -> None:
    """Heatmaps of (input position, gold rank) counts, one per augmentation variant."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(tables), figsize=(4.2 * len(tables), 3.8), constrained_layout=True)
    for ax, (variant, table) in zip(np.atleast_1d(axes), tables.items()):
        k = int(table["input_position"].max()) + 1
        grid = np.zeros((k, k))
        grid[table["input_position"].to_numpy(), table["gold_rank"].to_numpy()] = table["count"].to_numpy()
        grid = grid / grid.sum(axis=0, keepdims=True).clip(min=1)
        image = ax.imshow(grid, cmap="magma", origin="upper", vmin=0)
        ax.set(title=variant, xlabel="gold rank", ylabel="input position")
        fig.colorbar(image, ax=ax, fraction=0.046, label="P(position | gold rank)")
    save_figure(fig, path, 110)
