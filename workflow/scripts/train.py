"""Fine-tune a reranker (any method); resume from the last checkpoint if present.

The method's family (posbias.training.families) reads its inputs: listwise instances (and ω for the IPS
methods), or the silver labels as training windows (and the teacher's slot propensity for
debiasfirst_pointwise). One GPU or CPU: in this process. Several GPUs (``training.<name>.gpus`` > 1):
torchrun over the GPUs of this allocation, one process per GPU.
"""

from pathlib import Path

from posbias import hub, registry, schemas
from posbias.config import TRAIN_OPERATIONAL, fill_defaults, schema_node
from posbias.jobs import logged
from posbias.paper.training_curves import loss_figure
from posbias.training import TrainSpec, first_queries, launch_distributed, train

sm = snakemake  # noqa: F821
run = sm.params.run
with logged(sm, "train") as log:
    operational = {k: v for k, v in sm.config["training"][sm.wildcards.model]["hyper"].items()
                   if k in TRAIN_OPERATIONAL}  # logging and checkpointing: read here, not params (no retraining)
    hyper = fill_defaults(schema_node("training", "hyper"), dict(run["hyper"]))  # those its method does not read
    spec = TrainSpec(method=run["method"], seed=run.get("seed", sm.params.seed), word_budget=sm.params.word_budget,
                     prompt=sm.params.prompt, **(hyper | operational))
    instances, prop = registry.load(spec.family.read)(sm.input, spec, log)
    if run.get("max_queries"):
        instances = first_queries(instances, run["max_queries"])
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
    label = spec.family.label(run, sm.input)
    loss_figure(curve, sm.output.figure, f"{sm.wildcards.model} ({run['method']}, {label})")
    last = curve.tail(1).to_dicts()[0] if curve.height else {}
    log.info("trained %s on %d instances; last logged step %s", sm.wildcards.model, instances.height, last)
