"""Which checkpoint a training rerun may resume from.

Checkpoints live outside the rule's outputs (``results/checkpoints/<name>``), so a failed or killed
job leaves them for the rerun; they are resumed only by the same run configuration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from posbias.training.spec import TrainSpec

log = logging.getLogger(__name__)


def last_checkpoint(output_dir: Path) -> str | None:
    """The newest *complete* checkpoint in ``output_dir``.

    A job killed while a checkpoint was being written leaves a folder without its trainer state;
    such folders are skipped, so the rerun resumes from the previous complete one.
    """
    folders = sorted((p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                     key=lambda p: int(p.name.split("-")[-1]), reverse=True) if Path(output_dir).is_dir() else []
    for folder in folders:
        if (folder / "trainer_state.json").is_file() and any(folder.glob("*.safetensors")):
            return str(folder)
        log.warning("skipping incomplete checkpoint %s", folder)
    return None


def run_fingerprint(base_model: str, spec: TrainSpec, instances: pl.DataFrame, propensity: np.ndarray | None) -> dict:
    """What identifies a training run: base model, hyper-parameters, data and ω (or the slot propensity)."""
    data = json.dumps(instances.drop("query", "texts", strict=False).to_dicts()).encode()
    omega = None if propensity is None else np.asarray(propensity, dtype=np.float64).tobytes()
    return {"base_model": base_model, "spec": spec.__dict__, "data": hashlib.sha1(data).hexdigest(),
            "omega": None if omega is None else hashlib.sha1(omega).hexdigest()}


def claim_work_dir(work_dir: Path, fingerprint: dict) -> None:
    """Keep ``work_dir``'s checkpoints only if they belong to this exact run; otherwise start afresh.

    A rerun after a crash or preemption resumes; a rerun after the user changed the data, the base
    model or any hyper-parameter must not resume from the old run's optimiser state.
    """
    work_dir = Path(work_dir)
    stamp = work_dir / "posbias_run.json"
    wanted = json.dumps(fingerprint, sort_keys=True, default=str)
    if work_dir.is_dir() and (not stamp.is_file() or stamp.read_text() != wanted):
        log.info("checkpoints in %s belong to another run configuration; starting afresh", work_dir)
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(wanted)
