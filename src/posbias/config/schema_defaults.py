"""The config schema (config/schema.yaml) and its defaults: the one place every default is stated, read once.

The ground floor of :mod:`posbias.config`: it imports nothing of posbias.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[3] / "config" / "schema.yaml"


@functools.cache
def schema() -> dict:
    """The config schema (config/schema.yaml): the one place where every default is stated."""
    import yaml

    # libyaml's safe loader where PyYAML has it: the same document, parsed in 25 ms instead of 270 (every job's
    # process reads the schema, and a run has hundreds of jobs)
    return yaml.load(SCHEMA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (safe)


def schema_node(*path: str) -> dict:
    """The schema of the config object at ``path`` (through named entries: ``("training", "hyper")``)."""
    node = schema()
    for key in path:
        props = node.get("properties", {})
        node = props[key] if key in props else node["additionalProperties"]["properties"][key]
    return node


def defaults(*path: str) -> dict:
    """The schema's defaults of the config object at ``path``, nested defaults filled in.

    ``defaults("reranking")`` is what an empty ``reranking:`` section validates to;
    ``defaults("training", "hyper")`` the trainer settings. Code outside the workflow (tests,
    benches) takes its settings from here instead of restating them.
    """
    node = schema_node(*path)
    return fill_defaults(node, copy.deepcopy(node.get("default", {})))


def entry_defaults(section: str, field: str, value: str) -> dict:
    """The schema's defaults of a named entry of ``section`` whose ``field`` is ``value``: the
    entry's own defaults and those of the ``allOf`` branches that apply (e.g. a dataset's ``source``)."""
    node = schema_node(section)["additionalProperties"]
    out = {k: copy.deepcopy(v["default"]) for k, v in node.get("properties", {}).items() if "default" in v}
    for branch in node.get("allOf", []):
        condition = branch["if"]["properties"][field]
        if condition.get("const") == value or value in condition.get("enum", []):
            out |= {k: copy.deepcopy(v["default"]) for k, v in branch["then"].get("properties", {}).items()
                    if "default" in v}
    return out


def model_defaults(kind: str) -> dict:
    """The schema's defaults of a ``models:`` entry of this ``kind``."""
    return entry_defaults("models", "kind", kind)


def fill_defaults(node: dict, value):
    """``value`` with the defaults of ``node``'s properties added where missing, recursively."""
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = fill_defaults(sub, value[key])
    return value
