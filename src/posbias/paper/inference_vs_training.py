"""DebiasFirst Figure 5: training- vs inference-time debiasing, PermSC against K."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from posbias import debias, orders
from posbias.paper.seeds import per_query, with_variants
from posbias.paper.writers import integer_x, line_styles, pyplot, save_figure
from posbias.permuted_eval import query_interval

PERMSC = ("permsc", "permsc-window")  # the list-level (the papers') and the per-window variant
# the right panel's intervals: a fixed seed, so a rerun draws the same figure (the report rule reads no config seed)
_BOOTSTRAP_SEED = 0


def _family_k(method: str) -> tuple[str | None, int | None]:
    """(PermSC variant, K) of a method value; plain reranking is K = 1 of every variant."""
    spec = debias.parse(method)
    if spec.method == "none":
        return None, 1
    return (spec.method, spec.k) if spec.method in PERMSC else (None, None)


def inference_vs_training_figure(metrics: pl.DataFrame, training: dict, path: str | Path) -> pl.DataFrame:
    """DebiasFirst Figure 5: nDCG@10 per shuffle seed of every model with and without per-window
    PermSC, the list-level PermSC@K at its largest K as a dotted line (left); nDCG@10 against PermSC's
    number of permutations K, K = 1 being one reranking pass of a shuffled list (the mean over the
    shuffle seeds), one line per variant and PermSC flavour, the peak marked, each point with the 95% bootstrap
    interval of its mean over queries (right). Means over queries and training seeds. Returns the right panel's
    numbers (variant, dataset, retriever, method, k, value, and the interval's lo and hi)."""
    q = with_variants(per_query(metrics), training)
    parsed = {d: _family_k(d) for d in q["debias"].unique().to_list()}
    q = q.with_columns(method=pl.col("debias").replace_strict({d: f for d, (f, _) in parsed.items()}, default=None),
                       k=pl.col("debias").replace_strict({d: k for d, (_, k) in parsed.items()}, default=None,
                                                         return_dtype=pl.Int64)).drop_nulls("k")
    shuffled = pl.col("order").str.starts_with(orders.prefix("shuffled"))
    list_level = (pl.col("method") == "permsc") & (pl.col("order") == orders.ORIGINAL)
    q = q.filter((shuffled & (pl.col("method") != "permsc").fill_null(True)) | list_level)
    keys = ["variant", "dataset", "retriever"]
    per_seed = (q.filter(shuffled).with_columns(shuffle=pl.col("order").str.split("-").list.get(1).cast(pl.Int64))
                .group_by(*keys, "debias", "k", "shuffle", maintain_order=True).agg(pl.col("value").mean())
                .sort(*keys, "k", "shuffle"))
    # each point: the mean over queries of each query's mean (over shuffles and training seeds), with the
    # bootstrap interval of that mean over queries
    per_query_k = q.group_by(*keys, "method", "k", "query_id", maintain_order=True).agg(pl.col("value").mean())
    points = per_query_k.group_by(*keys, "method", "k", maintain_order=True).agg(
        pl.col("value").mean(),
        pl.col("value").map_batches(lambda v: pl.Series([query_interval(v.to_numpy(), _BOOTSTRAP_SEED)]),
                                    return_dtype=pl.List(pl.Float64), returns_scalar=True).alias("interval"))
    points = points.with_columns(lo=pl.col("interval").list.get(0), hi=pl.col("interval").list.get(1)).drop("interval")
    plain = points.filter(pl.col("k") == 1).drop("method")
    methods = points.drop_nulls("method").select(*keys, "method").unique()
    by_k = (pl.concat([points.drop_nulls("method"), methods.join(plain, on=keys).select(points.columns)])
            .sort(*keys, "method", "k"))
    plt = pyplot()
    # the right panel only where the run lists permsc@K (an empty panel says nothing a reader needs)
    panels = 1 if by_k.is_empty() else 2
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.8), constrained_layout=True, squeeze=False)
    axes = axes[0]
    # one colour and marker per model (variant · dataset), the same in both panels
    names = list(dict.fromkeys(f"{v} · {d}" for v, d in by_k.select("variant", "dataset").iter_rows()))
    names += [n for n in dict.fromkeys(f"{v} · {d}" for v, d in per_seed.select("variant", "dataset").iter_rows())
              if n not in names]
    style = dict(zip(names, line_styles(len(names))))
    for (variant, dataset, retriever, debias), g in per_seed.group_by(*keys, "debias", maintain_order=True):
        look = style[f"{variant} · {dataset}"]
        # the shuffle seeds are unordered: markers, no line between them
        axes[0].scatter(g["shuffle"], g["value"], marker=look["marker"], s=22, color=look["color"],
                        facecolors=look["color"] if debias == "none" else "none",
                        label=f"{variant} · {dataset}" + ("" if debias == "none" else f" + {debias}"))
    for (variant, dataset, retriever), g in by_k.filter(pl.col("method") == "permsc").group_by(*keys,
                                                                                              maintain_order=True):
        top = g.sort("k").row(-1, named=True)
        axes[0].axhline(top["value"], ls=":", lw=1.2, color=style[f"{variant} · {dataset}"]["color"],
                        label=f"{variant} · {dataset} + permsc@{top['k']} (lists)")
    series = by_k.group_by(*keys, "method", maintain_order=True)
    lines = by_k.select(*keys, "method").unique().height
    for i, ((variant, dataset, retriever, method), g) in enumerate(series):
        look = style[f"{variant} · {dataset}"]
        shift = 0.05 * (i - (lines - 1) / 2)  # each series a little apart on x, so meeting intervals stay apart
        below, above = (g["value"] - g["lo"]).fill_nan(0), (g["hi"] - g["value"]).fill_nan(0)
        axes[1].errorbar(g["k"] + shift, g["value"], yerr=[below, above], ms=4, ls="-" if method == "permsc" else "--",
                         capsize=3, elinewidth=0.8, label=f"{variant} · {dataset} · {method}", **look)
        peak = g.sort("value", descending=True).row(0, named=True)
        axes[1].scatter([peak["k"] + shift], [peak["value"]], s=110, facecolors="none", edgecolors=look["color"])
    lists = not by_k.filter(pl.col("method") == "permsc").is_empty()  # the dotted lines, where drawn
    axes[0].set(xlabel="shuffle seed", ylabel="nDCG@10",
                title="Per shuffle seed" + (" (dotted: PermSC over the lists)" if lists else ""))
    if panels == 2:
        axes[1].set(xlabel="PermSC permutations K (1 = one pass over a shuffled list)", ylabel="nDCG@10",
                    title="PermSC against K (dashed: per window; circle: peak;\nbars: 95% bootstrap interval over "
                          "queries)")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    integer_x(axes)
    save_figure(fig, path, 120)
    return by_k
