"""OC-SFT's presentation channels beyond order: how much relabelling a window's slot markers, or reading it with
another answer skeleton, alone moves each scorer's ranking, for order-consistency training, marker-diverse SFT
and OC-SFT with a marker penalty.

The paper names four channels ("候选顺序、分窗规则、槽位标记、答案骨架四个通道") and reports that "marker
重命名敏感性既未被顺序一致性训练也未被 marker 多样化 SFT 移除(held-out τ-PSI 0.035–0.059)", that "作者已证明
加 marker 惩罚在 6/6 个 held-out cell 上有效", and that its "答案骨架固定为 Grade: 0 一种". A cell is one
(dataset, first stage) the variants were probed on; the relabellings are drawn at evaluation, per test query,
so none was seen in training (held out); the second skeleton is one no variant trained with. A channel's probe
is the debiasing method whose K = 1 view changes only that channel (:func:`posbias.debias.probe_channel`:
``rename@1`` for markers, ``skeleton@NAME`` for the skeleton); its sensitivity is the probe row's
``plain_shift``: the mean over presentations of (1 − Kendall τ)/2 between the probed and the plain ranking of
the same presentation, which is τ-PSI over those two rankings.
"""

from __future__ import annotations

import polars as pl

from posbias.debias import probe_channel
from posbias.debias.adaptive import FIXED
from posbias.paper.seeds import named_variants
from posbias.paper.stability import paired_tests
from posbias.paper.stats import ALPHA, mean_sd, significant
from posbias.paper.writers import Table, fmt, fmt_sd, view_or_none

SENSITIVITY = "plain_shift"  # the probe row's τ-PSI against the plain ranking
KEYS = ("dataset", "retriever", "variant")


def _with_channel(frame: pl.DataFrame) -> pl.DataFrame:
    """The K = 1, fixed-budget rows of channel probes, with their ``channel``."""
    rows = frame.filter((pl.col("k") == 1) & (pl.col("budget") == FIXED))
    channels = {d: probe_channel(d) for d in rows["debias"].unique().to_list()}
    return (rows.with_columns(channel=pl.col("debias").replace_strict(channels, return_dtype=pl.String))
            .filter(pl.col("channel").is_not_null()))


def channel_rows(table: pl.DataFrame, variants: dict[str, str], references: dict[str, str]) -> pl.DataFrame:
    """One row per (cell, variant, channel) probed: the channel's τ-PSI (mean and sd over the variant's seeds),
    the plain scorer's order τ-PSI and nDCG@10 (K = 1) and the channel τ-PSI's difference from the channel's
    reference (``references[channel]``) in the same cell (NaN where the reference is not probed there)."""
    probed = named_variants(_with_channel(table), variants)
    plain = named_variants(table.filter((pl.col("debias") == "none") & (pl.col("k") == 1)
                                        & (pl.col("budget") == FIXED)), variants)
    rows = []
    for (dataset, retriever, variant, channel), seeds in probed.group_by(*KEYS, "channel", maintain_order=True):
        own = plain.filter((pl.col("dataset") == dataset) & (pl.col("retriever") == retriever)
                           & (pl.col("variant") == variant))
        row = {"dataset": dataset, "retriever": retriever, "variant": variant, "channel": channel,
               "seeds": seeds.height}
        row["channel_tau_psi"], row["channel_tau_psi_sd"] = mean_sd(seeds[SENSITIVITY].to_list())
        for column in ("tau_psi", "ndcg10"):
            row[column], row[f"{column}_sd"] = mean_sd(own[column].to_list())
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    data = pl.DataFrame(rows)
    ref = (data.filter(pl.col("variant") == pl.col("channel").replace_strict(references, default=None))
           .select("dataset", "retriever", "channel", pl.col("channel_tau_psi").alias("reference")))
    return (data.join(ref, on=["dataset", "retriever", "channel"], how="left")
            .with_columns(channel_gain=pl.col("channel_tau_psi") - pl.col("reference")).drop("reference"))


def cells_below(rows: pl.DataFrame, references: dict[str, str]) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (channel, variant) other than the channel's reference: (cells where its channel τ-PSI is below the
    reference's, cells where both were probed), the paper's "6/6 个 held-out cell" count."""
    both = rows.filter(pl.col("channel_gain").is_not_nan()
                       & (pl.col("variant") != pl.col("channel").replace_strict(references, default=None)))
    return {(c, v): (int((g["channel_gain"] < 0).sum()), g.height)
            for (c, v), g in both.group_by("channel", "variant", maintain_order=True)}


def channels(table: pl.DataFrame, per_query: pl.DataFrame, variants: dict[str, str] | None = None,
             references: list[str] | None = None) -> Table:
    """The channels table: per cell, variant and channel, the channel's τ-PSI (held-out relabellings, an unseen
    skeleton) beside the order τ-PSI and nDCG@10, the difference from the channel's reference (the first of
    ``references`` probed on it) with † for a Holm-corrected paired test over queries, and the count of cells
    below it."""
    variants = variants or {}
    probed = named_variants(_with_channel(table), variants)
    refs = {}
    for (channel,), part in probed.group_by("channel", maintain_order=True):
        refs[channel] = next((variants.get(m, m) for m in references or []
                              if variants.get(m, m) in set(part["variant"])), None)
    data = channel_rows(table, variants, refs)
    if data.is_empty():
        return Table(data, view_or_none([], "presentation channels", "none probed: no experiment's debias lists "
                                                                     "rename@1 or skeleton@NAME"),
                     "No scorer was probed on a presentation channel (rename@1, skeleton@NAME).")
    queries = _with_channel(per_query)
    marked = set()
    for channel, reference in refs.items():
        tests = paired_tests(queries.filter(pl.col("channel") == channel), variants, reference, (SENSITIVITY,))
        marked |= {(v, d, channel) for v, d, _ in significant(tests, ("variant", "dataset", "metric"))}
    view = []
    for r in data.iter_rows(named=True):
        mark = "†" if (r["variant"], r["dataset"], r["channel"]) in marked else ""
        view.append({"dataset": f"{r['dataset']} · {r['retriever']}", "channel": r["channel"], "variant": r["variant"],
                     "seeds": str(r["seeds"]),
                     "channel τ-PSI": fmt_sd(r["channel_tau_psi"], r["channel_tau_psi_sd"], 3),
                     "Δ channel τ-PSI": ("–" if r["variant"] == refs.get(r["channel"]) else fmt(r["channel_gain"], 3))
                     + mark,
                     "order τ-PSI": fmt_sd(r["tau_psi"], r["tau_psi_sd"], 3),
                     "nDCG@10": fmt_sd(r["ndcg10"], r["ndcg10_sd"], 3)})
    counts = "; ".join(f"{c}, {v}: {below}/{cells}" for (c, v), (below, cells) in cells_below(data, refs).items())
    notes = ("Presentation channels beyond order (OC-SFT). Channel τ-PSI: (1 − Kendall τ)/2 between a scorer's "
             "ranking of a presentation and its ranking of the same presentation with only that channel changed: "
             "markers, the slot markers [1] … [B] relabelled (one seeded relabelling per window, drawn at "
             "evaluation: held out from training); skeleton, the answer read with another skeleton (one no variant "
             "trained with). Mean over presentations and queries. Order τ-PSI and nDCG@10: the plain scorer over "
             "the shuffled presentations. Δ: the variant's channel τ-PSI minus the reference's "
             f"({', '.join(f'{c}: {v}' for c, v in refs.items())}); † differs in a paired two-sided Wilcoxon test "
             "over queries (per-query values averaged over seeds), Holm-corrected over the channel's comparisons, "
             f"p < {ALPHA}. Cells (dataset · first stage) where a variant's channel τ-PSI is below the "
             f"reference's: {counts or 'none compared'}.")
    return Table(data, pl.DataFrame(view), notes)
