"""Several GPUs: :func:`launch_distributed` runs one worker per GPU under torchrun; :func:`main` is
the worker's command line (``python -m posbias.training.launcher``)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import polars as pl
import torch

from posbias.training.checkpoints import claim_work_dir, run_fingerprint
from posbias.training.run import train
from posbias.training.spec import TrainSpec

log = logging.getLogger(__name__)


def launch_distributed(n_gpus: int, base_model: str, instances: pl.DataFrame, spec: TrainSpec, work_dir: Path,
                       out_dir: Path, propensity: np.ndarray | None, curve: Path) -> None:
    """Run :func:`main` under torchrun on ``n_gpus`` GPUs of this node (inside one SLURM allocation).

    The instances and the propensity go to files beside ``work_dir`` (which may be reset) for the
    worker processes. Multi-node jobs would start one such launcher per node with ``srun`` and a
    shared rendezvous (``--rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 --nnodes
    $SLURM_NNODES``); see docs/cluster.md.
    """
    import subprocess
    import sys

    from posbias import schemas

    claim_work_dir(work_dir, run_fingerprint(base_model, spec, instances, propensity))
    data = work_dir.with_name(f"{work_dir.name}.instances.parquet")
    schemas.write(instances, data, instance_schema(spec))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n_gpus}",
           "-m", "posbias.training.launcher", "--base-model", base_model, "--data", str(data), "--spec",
           json.dumps(spec.__dict__), "--work-dir", str(work_dir), "--out-dir", str(out_dir), "--curve", str(curve)]
    if propensity is not None:
        saved = work_dir.with_name(f"{work_dir.name}.propensity.npy")
        np.save(saved, np.asarray(propensity, dtype=np.float64))
        cmd += ["--propensity", str(saved)]
    log.info("launching %s", " ".join(cmd))
    subprocess.run(cmd, check=True)


def instance_schema(spec: TrainSpec) -> str:
    """The declared schema of a method's training instances."""
    return spec.family.instances


def main(argv: list[str] | None = None) -> None:
    """CLI for one training process (what torchrun starts on every GPU)."""
    import argparse

    from posbias import schemas

    ap = argparse.ArgumentParser(description="Train a reranker (one process of a torchrun job).")
    ap.add_argument("--base-model", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--spec", required=True, help="TrainSpec fields as JSON")
    ap.add_argument("--work-dir", required=True, type=Path)
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--curve", required=True, type=Path)
    ap.add_argument("--propensity", type=Path, help="ω (listwise) or π (pointwise) saved with numpy.save")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = TrainSpec(**json.loads(args.spec))
    propensity = np.load(args.propensity) if args.propensity else None
    curve = train(args.base_model, schemas.read(args.data, instance_schema(spec)), spec, args.work_dir, args.out_dir,
                  propensity, device="cuda" if torch.cuda.is_available() else "cpu")
    if int(os.environ.get("RANK", "0")) == 0:
        schemas.write(curve, args.curve, "loss_curve")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Every rank waits for rank 0's save, then tears the process group down before exit, as the
        # torch.distributed docs ask: a rank that exits with the group alive can abort while gloo's
        # worker threads are destroyed during interpreter shutdown ("terminate called without an
        # active exception", SIGABRT; pytorch/pytorch#179291), failing the whole torchrun job. Seen
        # intermittently in CI on CPU; the HF Trainer does not destroy the group itself.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
