"""Fine-tune a First model (any method x augmentation); resume from the last checkpoint if present.

One GPU or CPU: in this process. Several GPUs (``training.<name>.gpus`` > 1): torchrun over the GPUs
of this allocation, one process per GPU.
"""

from pathlib import Path

from posbias import propensity, report, schemas
from posbias.jobs import logged
from posbias.training import TrainSpec, launch_distributed, train

sm = snakemake  # noqa: F821
run = sm.params.run
with logged(sm.log[0], "train") as log:
    instances = schemas.read(sm.input.data, "listwise")
    if run.get("max_instances"):
        instances = instances.head(run["max_instances"])
    spec = TrainSpec(method=run["method"], seed=sm.params.seed, word_budget=sm.params.word_budget, **run["hyper"])
    work, out = Path(sm.params.checkpoints), Path(sm.output.model)
    if run["gpus"] > 1:
        data = work.with_name(f"{work.name}.instances.parquet")  # outside the work dir, which may be reset
        schemas.write(instances, data, "listwise")
        launch_distributed(run["gpus"], sm.params.base_path, data, spec, work, out,
                           Path(sm.input.omega[0]) if sm.input.omega else None, Path(sm.output.curve))
        curve = schemas.read(sm.output.curve, "loss_curve")
    else:
        omega = propensity.from_frame(schemas.read(sm.input.omega[0], "omega")) if sm.input.omega else None
        curve = train(sm.params.base_path, instances, spec, work, out, omega, sm.params.device)
        schemas.write(curve, sm.output.curve, "loss_curve")
    report.loss_figure(curve, sm.output.figure, f"{sm.wildcards.model} ({run['method']}, {run['aug']})")
    last = curve.tail(1).to_dicts()[0] if curve.height else {}
    log.info("trained %s on %d instances; last logged step %s", sm.wildcards.model, instances.height, last)
