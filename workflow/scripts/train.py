"""Fine-tune a reranker (any method); resume from the last checkpoint if present.

Listwise methods read the augmented listwise instances (and ω for the IPS methods); pointwise
methods read the silver labels and build the canonical windows and, for debiasfirst_pointwise, the
teacher's slot propensity. One GPU or CPU: in this process. Several GPUs (``training.<name>.gpus``
> 1): torchrun over the GPUs of this allocation, one process per GPU.
"""

from pathlib import Path

from posbias import hub, propensity, schemas, silver
from posbias.config import TRAIN_OPERATIONAL
from posbias.jobs import logged
from posbias.paper.training_curves import loss_figure
from posbias.training import TrainSpec, launch_distributed, train

sm = snakemake  # noqa: F821
run = sm.params.run
with logged(sm, "train") as log:
    operational = {k: v for k, v in sm.config["training"][sm.wildcards.model]["hyper"].items()
                   if k in TRAIN_OPERATIONAL}  # logging and checkpointing: read here, not params (no retraining)
    spec = TrainSpec(method=run["method"], seed=run.get("seed", sm.params.seed), word_budget=sm.params.word_budget,
                     prompt=sm.params.prompt, **run["hyper"], **operational)
    if spec.pointwise:
        labels = schemas.read(sm.input.data, "silver")
        instances = silver.instances(labels, schemas.read(sm.input.queries, "queries"),
                                     schemas.read(sm.input.corpus, "corpus"), averaged=spec.kind.averaged_targets)
        prop = (silver.slot_propensity(labels, int(labels["slot"].max()) + 1)
                if spec.kind.ips else None)
        if prop is not None:
            log.info("slot propensity of the teacher: %s", [round(float(x), 3) for x in prop])
    else:
        instances = schemas.read(sm.input.data, "listwise")
        prop = propensity.from_frame(schemas.read(sm.input.omega, "omega")) if "omega" in sm.input.keys() else None
    if run.get("max_instances"):
        instances = instances.head(run["max_instances"])
    work, out = Path(sm.params.checkpoints), Path(sm.output.model)
    base = sm.config["training"][sm.wildcards.model]["base_model"]
    hub.require(sm.params.base_path, f"models.{base}.path (training.{sm.wildcards.model}.base_model)")
    if run["gpus"] > 1:
        launch_distributed(run["gpus"], sm.params.base_path, instances, spec, work, out, prop, Path(sm.output.curve))
        curve = schemas.read(sm.output.curve, "loss_curve")
    else:
        curve = train(sm.params.base_path, instances, spec, work, out, prop, sm.params.device)
        schemas.write(curve, sm.output.curve, "loss_curve")
    label = run["aug"] if not spec.pointwise else "silver " + Path(sm.input.data).parent.name
    loss_figure(curve, sm.output.figure, f"{sm.wildcards.model} ({run['method']}, {label})")
    last = curve.tail(1).to_dicts()[0] if curve.height else {}
    log.info("trained %s on %d instances; last logged step %s", sm.wildcards.model, instances.height, last)
