"""DebiasFirst's propensity estimate ω as a heatmap."""

from __future__ import annotations

import numpy as np

from posbias.paper.writers import pyplot, save_figure


def omega_heatmap(omega: np.ndarray, path, title: str) -> None:
    """P(output rank | input position) = k·ω as a heatmap."""
    plt = pyplot()
    k = omega.shape[0]
    fig, ax = plt.subplots(figsize=(6, 5), constrained_layout=True)
    image = ax.imshow(k * omega, cmap="viridis", origin="upper")
    ax.set(xlabel="output rank", ylabel="input position", title=title,
           xticks=range(0, k, 2), yticks=range(0, k, 2), xticklabels=range(1, k + 1, 2), yticklabels=range(1, k + 1, 2))
    fig.colorbar(image, ax=ax, label="P(output rank | input position)")
    save_figure(fig, path, 120)
