"""Which interpreter runs the vLLM worker: a module of its own, so that the config checks read it without
importing the engine (whose methods import transformers)."""

from __future__ import annotations

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]  # where ./posbias.sh creates .venv-vllm


def worker_python(setting: str) -> Path:
    """The interpreter a ``vllm.python`` setting names: absolute; relative to the working directory where
    it exists there, else to the checkout (as ./posbias.sh made it); empty, this process's."""
    python = Path(setting or sys.executable)
    return python if python.is_absolute() or python.exists() else CHECKOUT / python
