"""Settings that would do less than they seem: refused in one line (a key its entry never reads, an adaptive
budget no experiment can run, a frontier or evaluation reference no experiment scores) or printed as a notice and run
(:func:`notices`). :func:`posbias.config.checks.validate` calls the refusals, the Snakefile prints the notices."""

from __future__ import annotations

from posbias import methods, orders
from posbias.config.experiments import orders_of, silver_window
from posbias.config.schema_defaults import defaults
from posbias.rerankers import model_kinds, modes


def _shuffled_orders(config: dict) -> dict[int, int]:
    """Each experiment's (by index) number of shuffled orders, where it has at least two (stability rows)."""
    counts = {i: sum(orders.is_kind(o, "shuffled") for o in orders_of(config, e))
              for i, e in enumerate(config["reranking"]["experiments"])}
    return {i: n for i, n in counts.items() if n >= 2}


def adaptive_budgets(config: dict) -> bool:
    """Whether some stability row is an adaptive budget: an experiment's plain scorer with at least as many
    shuffled orders as one of ``ocsft.adaptive.caps`` (a cap of 2 or more; posbias.stability.stability_table)."""
    caps = [cap for cap in config["ocsft"]["adaptive"]["caps"] if cap >= 2]
    experiments = config["reranking"]["experiments"]
    return any(cap <= n for i, n in _shuffled_orders(config).items() if "none" in experiments[i].get("debias", ["none"])
               for cap in caps)


def check_adaptive(config: dict) -> None:
    """An adaptive budget (``ocsft.adaptive``) that no experiment can run, or one that watches a top set as
    deep as the lists it watches (the set never changes, every query stops at patience + 1 draws: a falsely
    cheap frontier point); ValueError with one line. :func:`validate` calls it where the config sets
    ``ocsft.adaptive`` itself (the default caps ask for nothing), and some experiment has stability rows."""
    adaptive, shuffled = config["ocsft"]["adaptive"], _shuffled_orders(config)
    if not adaptive["caps"] or not shuffled:
        return
    most = max(shuffled.values())
    beyond = [cap for cap in adaptive["caps"] if cap > most]
    if beyond:
        raise ValueError(f"config: ocsft.adaptive.caps {beyond}: an adaptive budget draws at most K of an "
                         f"experiment's shuffled orders, and no experiment has more than {most}; lower the cap or "
                         f"add shuffled orders (at least {max(beyond)})")
    for i, n in shuffled.items():
        e = config["reranking"]["experiments"][i]
        depth = e.get("depth", config["reranking"]["depth"])
        if n >= min(adaptive["caps"]) and adaptive["depth"] >= depth:
            raise ValueError(f"config: ocsft.adaptive.depth {adaptive['depth']} watches the top {adaptive['depth']} "
                             f"of reranking.experiments[{i}]'s {depth} candidates, a set no draw can change (every "
                             f"query would stop at patience + 1 draws); set ocsft.adaptive.depth below {depth}")


def notices(config: dict) -> list[str]:
    """Settings that are valid but do less than they seem to, one line each, for the console before the
    run (the workflow prints them and runs)."""
    out = []
    adaptive = config["ocsft"]["adaptive"]
    stuck = [cap for cap in adaptive["caps"] if adaptive["patience"] + 1 > cap]
    if stuck and _shuffled_orders(config):
        out.append(f"ocsft.adaptive.patience {adaptive['patience']} needs {adaptive['patience'] + 1} draws to stop, "
                   f"more than the cap {stuck}: those adaptive rows can never stop early")
    vllm = defaults("models", "vllm")
    for name, model in config["models"].items():
        if model_kinds.of(model).prompted and model["engine"] != "vllm" and model.get("vllm", vllm) != vllm:
            out.append(f"models.{name}.vllm sets the vLLM engine's options but models.{name}.engine is "
                       f"{model['engine']}: they are not used (set engine: vllm to use them)")
    for name, run in config.get("training", {}).items():
        if methods.get(run["method"]).markers != "fixed" and silver_window(config, run["data"]) == 1:
            out.append(f"training.{name}: method {run['method']} relabels the slot markers, but its windows hold one "
                       "passage (B = 1): there is nothing to relabel, so it trains as single order")
    return out




def ignored_setting(config) -> str | None:
    """A key the config sets (before the schema's defaults fill every key) that its entry never reads: a
    ``training.<name>.hyper.ema_decay`` on a method without an EMA teacher, a ``models`` entry's
    ``identifiers`` on the Grades scorer (it marks passages with slot markers), its ``grade_window`` on a
    listwise reader (whose window is ``reranking.window``), an ``engine`` on a simulated scorer. One line,
    or None."""
    if not isinstance(config, dict):
        return None
    for name, model in (config.get("models") or {}).items():
        if not isinstance(model, dict):
            continue
        mode = model.get("mode", "first")
        kind, read_as = model_kinds.MODEL_KINDS.get(model.get("kind")), modes.MODES.get(mode)
        if kind is None or read_as is None:  # the schema's message comes later
            continue
        if kind.prompted and read_as.family == "pointwise" and "identifiers" in model:
            return (f"config: models.{name}.identifiers: the Grades scorer (mode grades) marks each passage with a "
                    "slot marker and reads grades, not identifiers, so it would be ignored; remove it")
        if kind.prompted and read_as.family != "pointwise" and "grade_window" in model:
            return (f"config: models.{name}.grade_window sets a Grades scorer's window, but mode {mode} reads "
                    "windows of reranking.window passages, so it would be ignored; remove it or set "
                    "reranking.window")
        if not kind.weights and "engine" in model:
            return (f"config: models.{name}.engine: a simulated scorer runs no model, so the engine would be "
                    "ignored; remove it")
    for name, run in (config.get("training") or {}).items():
        if not isinstance(run, dict) or "ema_decay" not in (run.get("hyper") or {}):
            continue
        try:
            method = methods.get(run.get("method"))
        except ValueError:
            continue  # the unknown method gets its own line
        if not method.ema_teacher:
            teachers = [m.name for m in methods.TRAINING_METHODS.values() if m.ema_teacher]
            return (f"config: training.{name}.hyper.ema_decay: method {method.name!r} has no EMA teacher, so the "
                    f"decay would be ignored; remove it, or use a method with one ({', '.join(teachers)})")
    return None


def check_references(config: dict) -> None:
    """A ``frontier.references`` entry no experiment of the config scores (before seeds expand and optional
    datasets whose files are missing drop their experiments): the frontier would have no reference row and no
    tests. ValueError with one line."""
    scored = {e["model"] for e in config["reranking"]["experiments"]}
    unscored = [r for r in config["frontier"]["references"] if r not in scored]
    if unscored:
        raise ValueError(f"config: frontier.references names {', '.join(map(repr, unscored))}, which no "
                         "reranking.experiments entry scores, so the frontier would have no reference row and no "
                         "tests; add an experiment of it or drop it from the references")
    reference = config["evaluation"].get("reference")
    if reference is not None and reference not in scored:
        raise ValueError(f"config: evaluation.reference {reference!r} is reranked by no reranking.experiments entry, "
                         "so the versus_baselines table would test nothing against it; name one of "
                         f"{', '.join(sorted(scored)) or '(no experiments)'} or set it to null")
