"""The throughput table (``config/throughput.yaml``): rates per model size, device and engine, and the model
seconds they give a plan's counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import yaml

from posbias import config as pbconfig
from posbias import engines
from posbias.errors import PosbiasError
from posbias.plan.counting import _model_path, tokenizer_source
from posbias.rerankers import model_kinds, modes

WORKFLOW = Path(__file__).resolve().parents[3]  # the checkout: config/throughput.yaml ships there


DEFAULT_ENGINE = pbconfig.model_defaults("causal_lm")["engine"]  # a row without `engine`, training, Grades


@dataclass(frozen=True)
class Throughput:
    """One row of the throughput table: a model size on a device."""

    params_b: float
    prefill_tokens_per_s: float
    call_s: float
    decode_s: float  # seconds per decoding step of one window (generation rerankers)
    load_s: float
    source: str
    engine: str = DEFAULT_ENGINE  # the inference engine the row was measured or derived for (posbias.engines)


# The throughput table's numbers: the key, and whether 0 is allowed (a size or a rate must be positive).
_RATES = {"params_b": False, "prefill_tokens_per_s": False, "call_s": True, "decode_s": True, "load_s": True}


def _rate(path, where: str, value, zero: bool) -> float:
    """A number of the throughput table, checked: finite, and positive (or non-negative where ``zero``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        need = "a number ≥ 0" if zero else "a number > 0"
        raise PosbiasError(f"{path}: {where} is {value!r}, not {need}{pbconfig.exponent_hint(value)}; fix the row "
                           "(device-hours would be wrong or negative)")
    return float(value)


def read_throughput(path: str | Path, device: str) -> tuple[list[Throughput], dict]:
    """(rows of ``device``, the table's other settings: ``simulated`` and ``train_factor``), every number
    checked; PosbiasError naming the file, the row and the key otherwise."""
    if not Path(path).is_file():
        raise PosbiasError(f"plan.throughput: {path} is not a file; point plan.throughput at the throughput table "
                           "(config/throughput.yaml ships with the workflow)")
    try:
        table = yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as exc:
        raise PosbiasError(pbconfig.yaml_syntax(path, exc)) from None
    devices = table.get("devices") if isinstance(table, dict) else None
    if not isinstance(devices, dict) or device not in devices:
        raise PosbiasError(f"{path}: plan.device {device!r} has no entry under `devices` "
                           f"({', '.join(devices or {})}); add its rows or pick one of them")
    rows = devices[device].get("rows") if isinstance(devices[device], dict) else None
    if not isinstance(rows, list) or not rows:
        raise PosbiasError(f"{path}: devices.{device}.rows must be a list of rows ({', '.join(_RATES)}, source)")
    parsed = []
    for i, row in enumerate(rows):
        where = f"devices.{device}.rows[{i}]"
        if not isinstance(row, dict) or not {*_RATES, "source"} <= set(row) <= {*_RATES, "source", "engine"}:
            have = sorted(row) if isinstance(row, dict) else row
            raise PosbiasError(f"{path}: {where} needs exactly the keys {', '.join(_RATES)}, source and optionally "
                               f"engine (has {have})")
        engine = row.get("engine", DEFAULT_ENGINE)
        if engine not in engines.ENGINES:
            raise PosbiasError(f"{path}: {where}.engine is {engine!r}; use one of {', '.join(engines.ENGINES)}")
        parsed.append(Throughput(**{k: _rate(path, f"{where}.{k}", row[k], zero) for k, zero in _RATES.items()},
                                 source=str(row["source"]), engine=engine))
    simulated = table.get("simulated")
    if not isinstance(simulated, dict):
        raise PosbiasError(f"{path}: `simulated` needs call_s (seconds per simulated window) and source")
    simulated = {**simulated, "call_s": _rate(path, "simulated.call_s", simulated.get("call_s"), True)}
    return parsed, {"simulated": simulated, "train_factor": _rate(path, "train_factor", table.get("train_factor"), False)}


def check_throughput(config: dict) -> None:
    """The throughput table of ``plan.throughput`` on ``plan.device``, read at parse time: a bad table is
    refused before any job, so a failed plan job never removes the last good plan."""
    read_throughput(throughput_path(config), config["plan"]["device"])


def throughput_for(rows: list[Throughput], params_b: float, engine: str = DEFAULT_ENGINE) -> Throughput:
    """The row of ``engine`` nearest in size (log scale), its tokens per second scaled by row size / model
    size (prefill is compute-bound: FLOPs per token grow with the parameters); call and load seconds as
    the row's."""
    mine = [r for r in rows if r.engine == engine]
    if not mine:
        raise PosbiasError(f"plan.throughput: the table has no {engine} rows for plan.device; add them (engine: "
                           f"{engine}) or plan with engine transformers")
    row = min(mine, key=lambda r: abs(math.log(r.params_b / params_b)))
    return Throughput(params_b, row.prefill_tokens_per_s * row.params_b / params_b, row.call_s, row.decode_s,
                      row.load_s, row.source if math.isclose(row.params_b, params_b, rel_tol=0.01)
                      else f"{row.source}, scaled from {row.params_b:g}B", engine)


def engine_of(config: dict, model: str, family: str, engine: str | None = None) -> str:
    """The engine whose throughput a ``family`` job of ``model`` runs at: the model's ``engine`` (or, given,
    ``engine`` wherever that engine serves the model's mode); training always on transformers."""
    spec = config["models"][model]
    if family == "train":
        return DEFAULT_ENGINE
    configured = spec.get("engine", DEFAULT_ENGINE)
    return engine if engine and spec.get("mode") in engines.ENGINES[engine].modes else configured


def model_params_b(config: dict, model: str, root: Path) -> float | None:
    """Parameters (billions) of a causal LM: counted from its ``config.json`` where it is on disk (no
    weights loaded), else the entry's ``params_b``; None for a simulated model."""
    spec = config["models"][model]
    if not model_kinds.of(spec).weights:
        return None
    if spec.get("params_b"):
        return spec["params_b"]
    path = Path(_model_path(config, tokenizer_source(config, model), root))
    if (path / "config.json").is_file():
        return parameters_b(path)
    raise PosbiasError(f"config: models.{model}.params_b is needed for the compute plan's time estimate "
                       f"({path} has no config.json here); set it to the model's size in billions")


def parameters_b(path: str | Path) -> float:
    """Parameters (billions) of the causal LM folder at ``path``, from its config.json (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in net.parameters()) / 1e9


def throughput_path(config: dict) -> Path:
    """``plan.throughput``: relative to the working directory where it exists there (your copy), else to
    the workflow (the table that ships with it)."""
    path = Path(config["plan"]["throughput"])
    return path if path.is_absolute() or path.exists() else WORKFLOW / path


def with_seconds(orders_: pl.DataFrame, config: dict, root: Path = Path("."),
                 throughput: Path | None = None, engine: str | None = None) -> pl.DataFrame:
    """``orders_`` with each row's throughput row and estimated model seconds: ``calls · call_s + tokens /
    tokens_per_s`` (generation: ``decode_s`` per call, a decoding step; training: ``tokens · train_factor /
    tokens_per_s``), on ``plan.device`` of the table at ``throughput`` (default :func:`throughput_path`),
    at the rows of each model's engine (``engine``: that engine wherever it serves the model, as if the
    config said so; :func:`engine_of`); ``root`` holds the tiny model builds whose size is counted."""
    plan = config["plan"]
    rows, other = read_throughput(throughput or throughput_path(config), plan["device"])
    call_s = other["simulated"]["call_s"]  # a simulated model's call costs the same in every mode
    simulated = Throughput(0.0, math.inf, call_s, call_s, 0.0, other["simulated"]["source"])
    sizes = {model: model_params_b(config, model, root) for model in orders_["model"].unique(maintain_order=True)}
    chosen = {}
    for family, model in orders_.select("family", "model").unique(maintain_order=True).iter_rows():
        params = sizes[model]
        chosen[family, model] = (simulated if params is None else
                                 throughput_for(rows, params, engine_of(config, model, family, engine)))
    seconds, loads, sources, params = [], [], [], []
    for family, model, calls, tokens in orders_.select("family", "model", "calls", "prompt_tokens").iter_rows():
        row = chosen[family, model]
        if family == "train":
            seconds.append(tokens * other["train_factor"] / row.prefill_tokens_per_s)
        else:  # the calls of a mode that decodes are decoding steps
            per_call = row.decode_s if modes.get(config["models"][model]["mode"]).decodes else row.call_s
            seconds.append(calls * per_call + tokens / row.prefill_tokens_per_s)
        loads.append(row.load_s)
        sources.append(row.source)
        params.append(row.params_b or None)
    return orders_.with_columns(model_seconds=pl.Series(seconds, dtype=pl.Float64),
                                load_s=pl.Series(loads, dtype=pl.Float64), params_b=pl.Series(params, dtype=pl.Float64),
                                throughput=pl.Series(sources, dtype=pl.String))
