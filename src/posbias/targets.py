"""Registry entries name their implementations as ``"module:name"`` strings, so that reading a registry (the
config checks, the rules at DAG time) imports neither the implementations nor torch; :func:`load` imports
one when a job needs it. One helper for every registry (modes, retriever kinds, training families, debias
combine steps, engines)."""

from __future__ import annotations

import importlib


def load(target: str):
    """The object ``target`` (``"package.module:name"``) names, its module imported now."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
