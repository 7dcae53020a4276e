"""One training run in this process: load, train (resuming), save the final model."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl
import torch

from posbias import registry
from posbias.errors import PosbiasError
from posbias.training.checkpoints import (
    claim_work_dir,
    last_checkpoint,
    run_fingerprint,
)
from posbias.training.spec import TrainSpec
from posbias.training.trainer import (
    Preempted,
    loss_curve,
    preemption_callback,
    trainer_class,
)

log = logging.getLogger(__name__)


def first_queries(instances: pl.DataFrame, n: int) -> pl.DataFrame:
    """The instances of the first ``n`` training queries by query id (``training.<name>.max_queries``, a label
    budget): sorted ids, so a smaller budget's queries are a subset of a larger one's."""
    kept = sorted(set(instances["query_id"].to_list()))[:n]
    return instances.filter(pl.col("query_id").is_in(kept))


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure: CUDA's ``OutOfMemoryError``, Python's ``MemoryError``, or
    the ``RuntimeError`` torch's CPU allocator raises ("DefaultCPUAllocator: can't allocate memory")."""
    text = str(exc).lower()
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text))


def memory_message(spec: TrainSpec, step: int, work_dir: Path, exc: BaseException) -> str:
    """The one line for a training step that ran out of memory: what the step held and what to lower."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return (f"training step {step + 1} ran out of memory ({first}); lower hyper.batch_size (now {spec.batch_size}) "
            f"and raise hyper.grad_accum (now {spec.grad_accum}) to keep their product, or set "
            f"hyper.gradient_checkpointing: true, or LoRA (hyper.lora); checkpoints so far stay in {work_dir}")


def train(base_model: str, instances: pl.DataFrame, spec: TrainSpec, work_dir: Path, out_dir: Path,
          propensity: np.ndarray | None = None, device: str = "cpu") -> pl.DataFrame:
    """Train, resuming from the last checkpoint in ``work_dir`` if any; save the final model to ``out_dir``.

    ``instances`` and ``propensity`` are what the method's family reads (:mod:`posbias.training.families`:
    listwise instances and ω (k × k) for the IPS methods; pointwise windows and the teacher's slot propensity
    π (B,) for ``debiasfirst_pointwise``); its ``setup`` makes the examples and collator. Returns the loss
    curve (schema LOSS_CURVE). With LoRA the adapters are merged into the base weights before saving, so the
    result loads like any checkpoint; with ``lora.merge`` false the folder holds the adapters alone (PEFT's
    ``adapter_config.json`` naming ``base_model``), which ``from_pretrained`` loads onto the base model.
    """
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        TrainingArguments,
        set_seed,
    )

    set_seed(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.bfloat16 if spec.bf16 else torch.float32)
    if spec.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(
            r=spec.lora["r"], lora_alpha=spec.lora["alpha"], lora_dropout=spec.lora["dropout"],
            target_modules=spec.lora["target_modules"],
            task_type="CAUSAL_LM"))
    setup = registry.load(spec.family.setup)(tokenizer, instances, spec, propensity)
    args = TrainingArguments(
        output_dir=str(work_dir), per_device_train_batch_size=spec.batch_size,
        gradient_accumulation_steps=spec.grad_accum, learning_rate=spec.learning_rate,
        weight_decay=spec.weight_decay, adam_beta2=spec.adam_beta2, num_train_epochs=spec.epochs, max_steps=spec.max_steps,
        lr_scheduler_type="cosine", warmup_steps=spec.warmup_ratio, max_grad_norm=spec.max_grad_norm,
        bf16=spec.bf16, neftune_noise_alpha=spec.neftune_alpha, gradient_checkpointing=spec.gradient_checkpointing,
        deepspeed=spec.deepspeed, save_strategy="steps", save_steps=spec.save_steps,
        save_total_limit=spec.save_total_limit, logging_steps=spec.logging_steps, report_to=[], seed=spec.seed,
        data_seed=spec.seed, remove_unused_columns=False, use_cpu=device == "cpu", disable_tqdm=False,
        dataloader_num_workers=0,
    )
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:  # torchrun jobs are claimed once, by the launcher
        claim_work_dir(work_dir, run_fingerprint(base_model, spec, instances, propensity))
    trainer = trainer_class()(
        model=model, args=args, train_dataset=setup.examples, data_collator=setup.collator,
        id_tokens=setup.id_tokens, spec=spec, propensity=setup.propensity,
    )
    for callback in setup.callbacks:
        trainer.add_callback(callback)
    resume = last_checkpoint(work_dir)
    if resume:
        log.info("resuming from %s", resume)
    preemption = preemption_callback()
    trainer.add_callback(preemption)
    try:
        trainer.train(resume_from_checkpoint=resume)
    except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        if not out_of_memory(exc):
            raise
        raise PosbiasError(memory_message(spec, trainer.state.global_step, work_dir, exc)) from exc
    finally:
        preemption.restore()
    if preemption.stopped_at is not None:
        if trainer.is_world_process_zero():
            with open(Path(work_dir) / "preemptions.jsonl", "a") as record:
                record.write(json.dumps({"stopped_after_step": preemption.stopped_at, "time": time.time()}) + "\n")
        raise Preempted(f"SIGTERM: stopped after step {preemption.stopped_at} with a checkpoint in {work_dir}; "
                        "rerun the job (--retries / --rerun-incomplete) to resume from it")
    if not trainer.is_world_process_zero():
        return loss_curve(trainer.state.log_history)
    final = trainer.model
    if spec.lora and spec.lora.get("merge", True):
        final = final.merge_and_unload()
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    final.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "posbias_training.json").write_text(json.dumps({
        "base_model": base_model, "method": spec.method, "instances": instances.height,
        "steps": trainer.state.global_step,
        "resumed_from": int(Path(resume).name.split("-")[-1]) if resume else None}, indent=1))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return loss_curve(trainer.state.log_history)
