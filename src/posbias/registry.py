"""What every registry shares. Entries name their implementations as ``"module:name"`` strings, so that
reading a registry (the config checks, the rules at DAG time) imports neither the implementations nor torch;
:func:`load` imports one when a job needs it. :func:`entry` is the lookup with the one-line error for an
unknown name. Used by the reranker modes, retriever kinds, training families, debias combine steps and
engines."""

from __future__ import annotations

import importlib


def load(target: str):
    """The object ``target`` (``"package.module:name"``) names, its module imported now."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def entry(registry: dict, name: str, noun: str):
    """``registry[name]``; ValueError naming every entry with its ``description`` otherwise."""
    if name not in registry:
        raise ValueError(f"{noun} {name!r} is unknown; use one of: "
                         + "; ".join(f"{n} ({e.description})" for n, e in registry.items()))
    return registry[name]
