"""Tables and figures built from the workflow's Parquet results."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl


def save_figure(fig, path: str | Path, dpi: int = 120) -> None:
    """Write ``fig`` as PNG at ``path`` and as PDF beside it (same stem), then close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=dpi)
    fig.savefig(Path(path).with_suffix(".pdf"))
    plt.close(fig)


def fmt(value: float, digits: int = 4) -> str:
    """A number to `digits` decimals for a table cell; None or NaN as an en dash."""
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def rerank_table(summary: pl.DataFrame) -> str:
    """Markdown: per experiment and debiasing method, quality (nDCG@10 original and shuffled), stability
    (τ-PSI, position-curve ends and spread) and cost (model calls, prompt tokens, seconds per query)."""
    lines = [
        "| model | dataset | retriever | debias | queries | nDCG@10 original | nDCG@10 shuffled (mean ± sd, M) "
        "| τ-PSI | curve p=1 | curve p=last | curve spread | calls/query | tokens/query | s/query | parse failures |",
        "|" + "---|" * 15,
    ]
    order = {"none": 0, "capcal": 1}
    rows = sorted(summary.iter_rows(named=True),
                  key=lambda r: (r["dataset"], r["model"], order.get(r["debias"], 2), r["debias"]))
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['dataset']} | {r['retriever']} | {r['debias']} | {r['queries']} | "
            f"{fmt(r['ndcg10_original'])} | "
            f"{fmt(r['ndcg10_shuffled_mean'])} ± {fmt(r['ndcg10_shuffled_sd'])} ({r['shuffles']}) | "
            f"{fmt(r['tau_psi'])} | {fmt(r['curve_first'])} | {fmt(r['curve_last'])} | {fmt(r['curve_spread'])} | "
            f"{fmt(r['calls_per_query'], 1)} | {fmt(r['prompt_tokens_per_query'], 0)} | "
            f"{fmt(r['seconds_per_query'], 3)} | {r['parse_failures']} |"
        )
    return "\n".join(lines) + "\n"


def position_curve_figure(curves: pl.DataFrame, path: str | Path) -> None:
    """nDCG@10 and MRR of the moved relevant passage against its input position, one line per system
    (the DebiasFirst paper's Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for (model, dataset, retriever, debias), group in curves.sort("position").group_by(
            ["model", "dataset", "retriever", "debias"], maintain_order=True):
        label = f"{model} · {dataset} · {retriever}" + ("" if debias == "none" else f" · {debias}")
        axes[0].plot(group["position"], group["target_ndcg10"], marker="o", ms=3, label=label)
        axes[1].plot(group["position"], group["target_mrr"], marker="o", ms=3, label=label)
    axes[0].set(xlabel="input position of the relevant passage", ylabel="nDCG@10 of that passage", ylim=(0, 1.02),
                title="Position curve")
    axes[1].set(xlabel="input position of the relevant passage", ylabel="MRR of that passage", ylim=(0, 1.02),
                title="Position curve (MRR)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_xticks(range(1, int(curves["position"].max() or 1) + 1, 2))
    axes[0].legend(fontsize=7, loc="lower left")
    save_figure(fig, path, 120)


def augmentation_table(tables: dict[str, pl.DataFrame], dataset: str) -> str:
    """Markdown: the share of teacher-best (gold rank 1) passages at each input position, per variant."""
    lines = [f"# Augmentation of {dataset}: input position of the teacher's best passage\n",
             "Share of instances whose teacher-ranked first passage sits at each input position; "
             "position-aware augmentation should make it uniform.\n",
             "| position | " + " | ".join(tables) + " |", "|" + "---|" * (len(tables) + 1)]
    best = {v: t.filter(pl.col("gold_rank") == 0).sort("input_position") for v, t in tables.items()}
    positions = next(iter(best.values()))["input_position"].to_list()
    for i, p in enumerate(positions):
        cells = []
        for t in best.values():
            total = t["count"].sum()
            cells.append(fmt(t["count"][i] / total if total else math.nan, 3))
        lines.append(f"| {p + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def augmentation_figure(tables: dict[str, pl.DataFrame], path: str | Path) -> None:
    """Heatmaps of (input position, gold rank) counts, one per augmentation variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

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


def loss_figure(curve: pl.DataFrame, path: str | Path, title: str) -> None:
    """Training loss (total and its logged parts) against the optimiser step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), constrained_layout=True)
    for column in ("loss", "rank_loss", "lm_loss", "supervised_loss", "consistency_loss"):
        if curve.height and curve[column].is_not_nan().any():
            ax.plot(curve["step"], curve[column], marker=".", label=column)
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path, 110)


def bsc_figure(stability: pl.DataFrame, path: str | Path, references: list[str] = ()) -> None:
    """nDCG@10, τ-PSI and retention Jaccard of BSC@K against K, one line per model; each model in
    ``references`` (the OC-SFT models) also as a dashed horizontal line at its K = 1 value, the
    comparison OC-SFT makes: K inference passes of a baseline against one pass of the trained model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    for (model, dataset), group in stability.sort("k").group_by(["model", "dataset"], maintain_order=True):
        for ax, column in zip(axes, ("ndcg10", "tau_psi", "jaccard")):
            line, = ax.plot(group["k"], group[column], marker="o", ms=3, label=f"{model} · {dataset}")
            if model in references:
                ax.axhline(group.filter(pl.col("k") == 1)[column][0], ls="--", lw=1, color=line.get_color(),
                           label=f"{model} · {dataset}, K = 1")
    from matplotlib.ticker import MaxNLocator

    for ax, title in zip(axes, ("nDCG@10", "τ-PSI (lower = more stable)", "retention Jaccard (higher = more stable)")):
        ax.set(xlabel="K (shuffles averaged)", title=title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    save_figure(fig, path, 120)
