"""The plan summarised per (family, model) in device-hours, as a table, and beside a run's cost files.
"""

from __future__ import annotations

import polars as pl

from posbias import config as pbconfig
from posbias import debias, paths, schemas, silver
from posbias.plan.counting import JOB_FAMILIES
from posbias.training import families


def summary(orders_: pl.DataFrame, config: dict) -> pl.DataFrame:
    """Per (family, model): jobs (= model loads: every job loads its model once), windows, calls, prompt
    tokens, whether both counts are exact, and device-hours: the model seconds plus ``load_s`` per job
    and GPU (a training job's GPUs share its tokens and each loads the model)."""
    out = []
    for (family, model), part in orders_.group_by("family", "model", maintain_order=True):
        jobs = part["job"].n_unique()
        gpus = max(config["training"][model].get("gpus", 0), 1) if family == "train" else 1
        # a training job's tokens are shared by its GPUs (data parallel); each GPU loads the model
        device_seconds = jobs * gpus * part["load_s"][0] + part["model_seconds"].sum()
        out.append({"family": family, "model": model, "params_b": part["params_b"][0], "jobs": jobs,
                    "model_loads": jobs, "windows": int(part["windows"].sum()), "calls": int(part["calls"].sum()),
                    "prompt_tokens": int(part["prompt_tokens"].sum()), "calls_exact": bool(part["calls_exact"].all()),
                    "tokens_exact": bool(part["tokens_exact"].all()), "device_hours": device_seconds / 3600,
                    "throughput": part["throughput"][0], "tokenizer": part["tokenizer"][0]})
    return pl.DataFrame(out, schema={"family": pl.String, "model": pl.String, "params_b": pl.Float64,
                                     "jobs": pl.Int64, "model_loads": pl.Int64, "windows": pl.Int64,
                                     "calls": pl.Int64, "prompt_tokens": pl.Int64, "calls_exact": pl.Boolean,
                                     "tokens_exact": pl.Boolean, "device_hours": pl.Float64,
                                     "throughput": pl.String, "tokenizer": pl.String})


def tokenizers(summary_: pl.DataFrame) -> str:
    """Which tokenizer counted each model's tokens, in words: "tokenizer (model, model); …"."""
    by = summary_.group_by("tokenizer", maintain_order=True).agg(pl.col("model").unique(maintain_order=True))
    return "; ".join(f"{t} ({', '.join(models)})" for t, models in by.iter_rows())


def _hours(value: float) -> str:
    return f"{value:,.2f}" if value >= 0.01 else f"{value:.2g}"


def _count(value: int, exact: bool) -> str:
    return f"{value:,}" if exact else f"~{value:,}"


def table(summary_: pl.DataFrame, device: str):
    """The plan as a :class:`posbias.paper.writers.Table`: a row per family and model, then the totals
    per family and overall; a ``~`` marks an estimated count."""
    from posbias.paper.writers import Table

    def cells(family, model, part):
        return {"family": family, "model": model, "jobs": f"{part['jobs'].sum():,}",
                "model loads": f"{part['model_loads'].sum():,}", "windows": f"{part['windows'].sum():,}",
                "model calls": _count(int(part["calls"].sum()), bool(part["calls_exact"].all())),
                "prompt tokens": _count(int(part["prompt_tokens"].sum()), bool(part["tokens_exact"].all())),
                f"{device} hours": _hours(part["device_hours"].sum())}

    rows = [cells(f, m, summary_.filter((pl.col("family") == f) & (pl.col("model") == m)))
            for f, m in summary_.select("family", "model").iter_rows()]
    rows += [cells(f, "all", summary_.filter(pl.col("family") == f))
             for f in JOB_FAMILIES if f in set(summary_["family"])]
    rows.append(cells("all", "all", summary_))
    notes = (f"Device-hours on {device} from the throughput table: model loads + calls · seconds per call + prompt "
             "tokens / tokens per second (training: tokens × train_factor, shared by its GPUs, each loading the "
             "model). A ~ marks an estimate: "
             "sliding windows after the first (their passages depend on the model's answers), generation "
             "(decoding steps bounded by max_new_tokens), a tokenizer not on disk (counted with the real tokenizer "
             "of its family, posbias.standins, or the rule of thumb of RuleOfThumbTokenizer), training (steps × "
             "lists per step × sampled tokens per list). Tokens counted with: " + tokenizers(summary_)
             + ". Throughput rows: " + "; ".join(summary_["throughput"].unique(maintain_order=True)) + ".")
    return Table(summary_, pl.DataFrame(rows), notes)


def versus_run(planned: pl.DataFrame, actual: pl.DataFrame) -> pl.DataFrame:
    """Planned beside actual, per job order: ``actual`` has the plan's keys (family, model, dataset,
    retriever, debias, order) and the summed windows, calls, prompt_tokens and seconds of the
    ``*.cost.parquet`` the jobs wrote (:func:`actual`). ``calls_match``: equal where the plan is exact,
    actual ≤ planned where it is a bound (generation); ``tokens_match``: equal, null where the plan
    estimates; ``seconds_ratio``: actual / planned model seconds."""
    keys = ["family", "model", "dataset", "retriever", "debias", "order"]
    joined = planned.join(actual, on=keys, how="inner", suffix="_actual")
    return joined.with_columns(
        calls_match=pl.when(pl.col("calls_exact")).then(pl.col("calls") == pl.col("calls_actual"))
        .otherwise(pl.col("calls_actual") <= pl.col("calls")),
        tokens_match=pl.when(pl.col("tokens_exact")).then(pl.col("prompt_tokens") == pl.col("prompt_tokens_actual")),
        seconds_ratio=pl.col("seconds") / pl.col("model_seconds"),
    ).select(*keys, "calls", "calls_actual", "calls_exact", "calls_match", "prompt_tokens", "prompt_tokens_actual",
             "tokens_exact", "tokens_match", "model_seconds", "seconds", "seconds_ratio", "throughput")


def cost_files(config: dict) -> list[tuple[dict, str]]:
    """(plan keys, path) of every cost file a run writes for a planned job order: each window-level
    rerank order, the propensity reranking, the silver labels of a model teacher and each pool design."""
    out = []
    batches = pbconfig.batch_of_order(config)
    for m, d, r, order, method in pbconfig.rerank_grid(config):
        if debias.parse(method).level == "window":
            out.append(({"family": "rerank", "model": m, "dataset": d, "retriever": r, "debias": method,
                         "order": order}, pbconfig.reranked_file(batches, m, d, r, order, method, "cost.parquet")))
    prop = config.get("propensity", {})
    if prop.get("model"):
        out.append(({"family": "propensity_rerank", "model": prop["model"], "dataset": prop["dataset"],
                     "retriever": prop["retriever"], "debias": "none", "order": "propensity"},
                    paths.propensity(prop["model"], "reranked.cost")))
    for run in config.get("training", {}).values():
        teacher = pbconfig.silver_teacher(config, run) if families.of(run["method"]).silver else silver.QRELS_TEACHER
        if teacher != silver.QRELS_TEACHER:
            out.append(({"family": "silver_labels", "model": teacher, "dataset": run["data"],
                         "retriever": pbconfig.silver_retriever(config, run["data"]), "debias": "none",
                         "order": f"t{pbconfig.silver_shuffles(config, run)}"},
                        pbconfig.silver_path(config, run).removesuffix(".parquet") + ".cost.parquet"))
    for m, d, r in pbconfig.pool_targets(config):
        out.append(({"family": "pool_design", "model": m, "dataset": d, "retriever": r, "debias": "none",
                     "order": "pool"}, paths.pool(m, d, r, "cost.parquet")))
    return list({path: (keys, path) for keys, path in out}.values())


def actual(files: list[tuple[dict, str]]) -> pl.DataFrame:
    """The summed windows, calls, prompt tokens and seconds of each cost file, with its plan keys."""
    rows = []
    for keys, path in files:
        cost = schemas.read(path, "cost")
        rows.append(keys | {"windows": int(cost["windows"].sum()), "calls": int(cost["calls"].sum()),
                            "prompt_tokens": int(cost["prompt_tokens"].sum()), "seconds": float(cost["seconds"].sum())})
    return pl.DataFrame(rows, schema={**{k: pl.String for k in ("family", "model", "dataset", "retriever", "debias",
                                                                "order")},
                                      "windows": pl.Int64, "calls": pl.Int64, "prompt_tokens": pl.Int64,
                                      "seconds": pl.Float64})


def checked_table(planned: pl.DataFrame, costs: list[str], keys: list[dict]):
    """The plan-check table: the plan's rows beside the cost files a run wrote (``costs``, each with its plan
    ``keys``), summed per family and model (:func:`check_table`)."""
    return check_table(versus_run(planned, actual(list(zip(keys, costs)))))


def check_table(checked: pl.DataFrame):
    """:func:`versus_run`'s rows summed per family and model, as a :class:`posbias.paper.writers.Table`:
    planned and actual calls and tokens, how many job orders match, and actual / planned model seconds."""
    from posbias.paper.writers import Table, fmt

    grouped = checked.group_by("family", "model", maintain_order=True).agg(
        orders=pl.len(), calls=pl.col("calls").sum(), calls_actual=pl.col("calls_actual").sum(),
        calls_exact=pl.col("calls_exact").all(), calls_match=pl.col("calls_match").sum(),
        prompt_tokens=pl.col("prompt_tokens").sum(), prompt_tokens_actual=pl.col("prompt_tokens_actual").sum(),
        tokens_exact=pl.col("tokens_exact").all(), tokens_match=pl.col("tokens_match").sum(),
        model_seconds=pl.col("model_seconds").sum(), seconds=pl.col("seconds").sum())
    view = grouped.select(
        "family", "model", pl.col("orders").alias("job orders"),
        pl.format("{} / {}", pl.col("calls"), pl.col("calls_actual")).alias("calls plan / run"),
        pl.format("{} of {}", pl.col("calls_match"), pl.col("orders")).alias("calls match"),
        pl.format("{} / {}", pl.col("prompt_tokens"), pl.col("prompt_tokens_actual")).alias("tokens plan / run"),
        pl.format("{} of {}", pl.col("tokens_match"), pl.col("orders")).alias("tokens match"),
        pl.struct("model_seconds", "seconds").map_elements(
            lambda r: f"{fmt(r['model_seconds'], 1)} / {fmt(r['seconds'], 1)}", return_dtype=pl.String)
        .alias("model s plan / run"),
    )
    exact = checked.filter(pl.col("calls_exact") & pl.col("tokens_exact"))
    ok = exact.filter(pl.col("calls_match") & pl.col("tokens_match")).height
    notes = (f"{ok} of {exact.height} job orders the plan counts exactly match the run in calls and tokens; "
             f"{checked.height - exact.height} are estimates or bounds (calls match: actual ≤ planned for "
             "generation; tokens match: counted only where exact). Model seconds exclude model loads; "
             "the run's are the reranking wall time of the jobs' cost files.")
    return Table(grouped, view, notes)
