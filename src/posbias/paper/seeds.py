"""Training seeds in tables and figures: a model ``<name>-s<seed>`` is one seed of the variant ``<name>``."""

from __future__ import annotations

import polars as pl

from posbias import methods
from posbias.config import variant_of


def with_variants(frame: pl.DataFrame, training: dict) -> pl.DataFrame:
    """``frame`` with a ``variant`` column: the training entry each ``model`` is a seed of."""
    names = {m: variant_of(training, m) for m in frame["model"].unique().to_list()}
    return frame.with_columns(variant=pl.col("model").replace_strict(names, return_dtype=pl.String))


def named_variants(frame: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    """``frame`` with a ``variant`` column from a report rule's ``variants`` param ({model: variant}); a model
    it does not name is its own variant."""
    return frame.with_columns(variant=pl.col("model").replace_strict(variants, default=pl.col("model")))


def on_shared_datasets(plain: pl.DataFrame, study: list[dict], group: tuple[str, ...]) -> pl.DataFrame:
    """``plain`` (rows with ``variant`` and ``dataset``) kept, for each group of ``study`` (its entries' values
    of ``group``), to the datasets every variant of the group was measured on, with a ``shared`` column naming
    them: a comparison across students must not average one over DL19 and DL20 and another over 16 collections
    (dataset difficulty would pass for a teacher's or a budget's effect). A variant in several groups keeps
    each group's rows (``group_key``)."""
    frames = []
    for key in dict.fromkeys(tuple(s[k] for k in group) for s in study):
        names = [s["variant"] for s in study if tuple(s[k] for k in group) == key]
        measured = [set(plain.filter(pl.col("variant") == v)["dataset"].to_list()) for v in names]
        shared = sorted(set.intersection(*measured)) if measured and all(measured) else []
        frames.append(plain.filter(pl.col("variant").is_in(names) & pl.col("dataset").is_in(shared))
                      .with_columns(group_key=pl.lit(" · ".join(map(str, key))), shared=pl.lit(", ".join(shared))))
    return pl.concat(frames) if frames else plain.with_columns(group_key=pl.lit(""), shared=pl.lit(""))


def shown(variant: str, settings: dict[str, dict]) -> str:
    """A variant as a table prints it: its name, and for our construction of a baseline the paper names without
    its form (:attr:`posbias.methods.TrainingMethod.ours`) its method's label beside it, so that a reader never
    takes it for the paper's method. ``settings``: the rule's {variant: {"method": …}}
    (:func:`posbias.config.pointwise_settings`)."""
    method = settings.get(variant, {}).get("method")
    return f"{variant} [{methods.get(method).label}]" if method and methods.get(method).ours else variant


def per_query(metrics: pl.DataFrame, measure: str = "nDCG@10") -> pl.DataFrame:
    return metrics.filter(pl.col("measure") == measure)


def seed_curves(curves: pl.DataFrame, training: dict, debias: str | None = "none") -> pl.DataFrame:
    """Position curves averaged over each variant's seeds: mean and sd (over seeds) per position, for
    one debiasing method (None: every method, as its own curve); with one seed, its interval over queries
    (``*_lo``, ``*_hi``; with several, the first seed's, which the figure does not show)."""
    c = with_variants(curves if debias is None else curves.filter(pl.col("debias") == debias), training)
    keys = ("variant", "dataset", "retriever", "debias")
    metrics = ("target_ndcg10", "target_mrr")
    return (c.group_by(*keys, "position", maintain_order=True)
            .agg(pl.len().alias("seeds"), pl.col("queries").max(),
                 *[pl.col(m).mean().alias(m) for m in metrics],
                 *[pl.col(m).std().fill_null(0.0).alias(f"{m}_sd") for m in metrics],
                 *[pl.col(f"{m}_{end}").first().alias(f"{m}_{end}") for m in metrics for end in ("lo", "hi")])
            .sort(*keys, "position"))
