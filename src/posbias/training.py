"""Fine-tuning listwise rerankers: the HF ``Trainer`` with the DebiasFirst objectives.

Each training example is one listwise instance: the prompt of :mod:`posbias.prompts` ending with the
assistant's opening ``[`` (exactly what First inference reads), followed by the teacher's ranking
``B] > [A] > … ]`` and EOS. The model is trained on

    rank_weight · L_rank(-IPS) + lm_weight · L_LM

where the rank scores are the logits of the identifier tokens at the position of that opening
``[`` (the same position inference reads) and L_LM is the token-mean NLL of the ranking string.
``lm_tokens: N`` cuts the answer to its first N tokens (sequences get shorter too): with N = 1,
L_LM is the cross-entropy of the top-ranked identifier, the cheap stand-in for the LM term with
which the tiny toy models learn in CPU-minutes (shared/notes/tiny-model-training.md); over the
whole ranking (80 mostly-formatting tokens) the toy First model only learned the position prior
in 300 steps. ``lm_softmax: identifiers`` (with N = 1) takes that cross-entropy over the window's
identifiers only, i.e. the first token's likelihood under constrained decoding. Measured on the toy
with a plain PyTorch loop of the same model (300 steps of 32): over the whole vocabulary, batch
top-1 stayed at 0.43 (the rate at which the best passage is first in the biased order), over the
identifiers it reached 0.81; through this trainer the whole-vocabulary version was still at the
prior after 400 steps. The paper presets keep the whole ranking over the whole vocabulary.
Methods (the ``method`` wildcard): ``first`` (rank + LM), ``debiasfirst`` (rank-IPS + LM),
``rank``, ``rank_ips``, ``rank_ips_lm`` (ablations; ``rank_ips_lm`` is DebiasFirst's objective
on whatever augmentation it is paired with).

The pointwise family (OC-SFT and its baselines, :mod:`posbias.ocsft`) runs through the same
``Trainer`` subclass with its own collator and loss; see :data:`posbias.ocsft.POINTWISE_METHODS`.

Everything else is the HF ``Trainer``: full fine-tuning or LoRA (PEFT), DeepSpeed ZeRO through a
config file, bf16 where asked, gradient accumulation, cosine schedule with warm-up, NEFTune,
gradient checkpointing, periodic checkpoints and automatic resume from the last one, seeds.

Preemption and time limits: SIGTERM (SLURM's preemption signal, and the time-limit warning asked
for with ``--signal=TERM@<seconds>``) makes the run finish its current optimiser step, write a
checkpoint and stop with :class:`Preempted` (a non-zero exit), so that the job's rerun
(``--retries``, ``--rerun-incomplete``) resumes from that checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import torch

from posbias import losses, ocsft
from posbias.augment import gold_ranks
from posbias.prompts import identifiers, render

log = logging.getLogger(__name__)

METHODS = {
    # method: (use IPS, rank term on, LM term on)
    "first": (False, True, True),
    "debiasfirst": (True, True, True),
    "rank": (False, True, False),
    "rank_ips": (True, True, False),
    "rank_ips_lm": (True, True, True),
}


@dataclass
class TrainSpec:
    """Hyper-parameters of one training run (config ``training.<name>.hyper``)."""

    method: str = "first"
    views: int = 2  # ocsft: presentations per window (view 0 supervised)
    consistency: float = 5.0  # ocsft: λ of the order-consistency penalty
    consistency_warmup: int = 500  # ocsft: steps over which λ rises linearly from 0
    rank_weight: float = 10.0
    lm_weight: float = 1.0
    lm_tokens: int | None = None  # L_LM over the first N answer tokens only (None: the whole ranking + EOS)
    lm_softmax: str = "vocab"  # L_LM's softmax: the whole vocabulary, or (lm_tokens 1) the window's identifiers
    ips_clip: float | None = 10.0
    learning_rate: float = 5e-6
    weight_decay: float = 0.0
    adam_beta2: float = 0.999
    warmup_ratio: float = 0.05
    epochs: float = 3.0
    max_steps: int = -1
    batch_size: int = 2
    grad_accum: int = 4
    max_grad_norm: float = 1.0
    bf16: bool = False
    neftune_alpha: float | None = None
    gradient_checkpointing: bool = False
    lora: dict | None = None  # {r, alpha, dropout, target_modules}
    deepspeed: str | None = None  # path of a DeepSpeed JSON config
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 5
    word_budget: int = 300
    max_context: int = 4096
    prompt: str = "rankzephyr"  # the base model's listwise prompt style (posbias.prompts.PROMPT_STYLES)
    seed: int = 42
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHODS and self.method not in ocsft.POINTWISE_METHODS:
            raise ValueError(f"training method {self.method!r}: use one of "
                             f"{sorted(METHODS) + sorted(ocsft.POINTWISE_METHODS)}")
        if self.lm_softmax not in ("vocab", "identifiers"):
            raise ValueError(f"lm_softmax {self.lm_softmax!r}: use vocab or identifiers")
        if self.lm_softmax == "identifiers" and self.lm_tokens != 1:
            raise ValueError("lm_softmax: identifiers scores the first answer token only; set lm_tokens: 1")

    @property
    def pointwise(self) -> bool:
        return self.method in ocsft.POINTWISE_METHODS


def target_text(doc_ids: list[str], teacher_ranking: list[str]) -> str:
    """The ranking string after the opening bracket: ``B] > [A] > [C]``."""
    letters = identifiers(len(doc_ids))
    index = {d: i for i, d in enumerate(doc_ids)}
    return "] > [".join(letters[index[d]] for d in teacher_ranking) + "]"


def encode_instances(tokenizer, instances: pl.DataFrame, word_budget: int, max_context: int,
                     style: str = "rankzephyr", lm_tokens: int | None = None) -> list[dict]:
    """Tokenised examples: input_ids, labels (-100 on the prompt), rank_position, gold_rank.

    ``lm_tokens``: keep only the first N answer tokens (None: the whole ranking and EOS)."""
    examples = []
    for rec in instances.iter_rows(named=True):
        prompt = render(tokenizer, rec["query"], rec["texts"], word_budget, max_context, answer_prefix="[",
                        style=style)
        prompt_ids = prompt.input_ids or tokenizer(prompt.text, add_special_tokens=True)["input_ids"]
        target_ids = tokenizer(target_text(rec["doc_ids"], rec["teacher_ranking"]),
                               add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        if lm_tokens is not None:
            target_ids = target_ids[:lm_tokens]
        examples.append({
            "input_ids": prompt_ids + target_ids,
            # the opening "[" is trained too: it is the prompt's last token and the answer's first
            "labels": [-100] * (len(prompt_ids) - 1) + [prompt_ids[-1]] + target_ids,
            "rank_position": len(prompt_ids) - 1,
            "gold_rank": gold_ranks(rec["doc_ids"], rec["teacher_ranking"]),
        })
    return examples


class ListwiseCollator:
    """Right-pads a batch; lists of different lengths get gold ranks padded with -1 (ignored)."""

    def __init__(self, pad_token_id: int):
        self.pad = pad_token_id

    def __call__(self, batch: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(b["input_ids"]) for b in batch)
        k = max(len(b["gold_rank"]) for b in batch)
        ids = torch.full((len(batch), width), self.pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        gold = torch.full((len(batch), k), -1, dtype=torch.long)
        for i, b in enumerate(batch):
            n = len(b["input_ids"])
            ids[i, :n] = torch.tensor(b["input_ids"])
            labels[i, :n] = torch.tensor(b["labels"])
            mask[i, :n] = 1
            gold[i, : len(b["gold_rank"])] = torch.tensor(b["gold_rank"])
        positions = torch.tensor([b["rank_position"] for b in batch])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "rank_position": positions,
                "gold_rank": gold}


def objective(logits: torch.Tensor, batch: dict, id_tokens: list[int], spec: TrainSpec,
              propensity: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
    """The joint loss of one batch, and its parts for logging."""
    use_ips, with_rank, with_lm = METHODS[spec.method]
    parts: dict[str, float] = {}
    total = logits.new_zeros(())
    rows = torch.arange(logits.shape[0], device=logits.device)
    rank_logits = logits[rows, batch["rank_position"]][:, id_tokens].float()
    if with_rank:
        rank_terms = []
        for i in range(logits.shape[0]):
            valid = batch["gold_rank"][i] >= 0
            k = int(valid.sum())
            scores, gold = rank_logits[i, :k], batch["gold_rank"][i, :k]
            if use_ips:
                if propensity is None or propensity.shape[0] != k:
                    raise ValueError(f"method {spec.method} needs a {k}x{k} propensity matrix")
                rank_terms.append(losses.rank_ips_loss(scores, gold, propensity.to(scores.device), spec.ips_clip))
            else:
                rank_terms.append(losses.first_rank_loss(scores, gold))
        rank = torch.stack(rank_terms).mean()
        parts["rank_loss"] = float(rank.detach())
        total = total + spec.rank_weight * rank
    if with_lm:
        lm = (losses.first_identifier_loss(rank_logits, batch["gold_rank"]) if spec.lm_softmax == "identifiers"
              else losses.lm_loss(logits, batch["labels"]))
        parts["lm_loss"] = float(lm.detach())
        total = total + spec.lm_weight * lm
    return total, parts


def _trainer_class():
    from transformers import Trainer, TrainerCallback

    class RerankerTrainer(Trainer):
        """``Trainer`` whose loss is :func:`objective` (listwise) or :func:`posbias.ocsft.pointwise_objective`;
        logs the loss parts. For the pointwise family it tells the collator the epoch (view seeds)."""

        def __init__(self, *args, id_tokens, spec, propensity, **kwargs):
            super().__init__(*args, **kwargs)
            self.id_tokens, self.spec, self.propensity = id_tokens, spec, propensity
            self._parts: dict[str, list[float]] = {}
            if spec.pointwise:
                collator = self.data_collator

                class EpochToCollator(TrainerCallback):
                    def on_epoch_begin(self, args, state, control, **kwargs):
                        collator.epoch = int(state.epoch or 0)

                self.add_callback(EpochToCollator())

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.spec.pointwise:
                lam = losses.consistency_weight(self.state.global_step, self.spec.consistency,
                                                self.spec.consistency_warmup)
                loss, parts = ocsft.pointwise_objective(model, inputs, self.id_tokens, self.spec.method, lam)
                outputs = None
            else:
                outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
                loss, parts = objective(outputs.logits, inputs, self.id_tokens, self.spec, self.propensity)
            for key, value in parts.items():
                self._parts.setdefault(key, []).append(value)
            return (loss, outputs) if return_outputs else loss

        def log(self, logs, *args, **kwargs):
            for key, values in self._parts.items():
                logs[key] = float(np.mean(values))
            self._parts = {}
            super().log(logs, *args, **kwargs)

    return RerankerTrainer


class Preempted(RuntimeError):
    """Training stopped on SIGTERM after writing a checkpoint; a rerun resumes from it."""


def _preemption_callback():
    import signal

    from transformers import TrainerCallback

    class CheckpointOnSigterm(TrainerCallback):
        """On SIGTERM: finish the current step, save a checkpoint, stop. Ranks agree through an all-reduce,
        so every process of a torchrun job saves the same step."""

        def __init__(self):
            self.received = False
            self.stopped_at: int | None = None
            self.previous = signal.signal(signal.SIGTERM, self._on_sigterm)

        def _on_sigterm(self, signum, frame):
            log.warning("SIGTERM received: checkpointing after the current step")
            self.received = True

        def restore(self):
            signal.signal(signal.SIGTERM, self.previous)

        def on_step_end(self, args, state, control, **kwargs):
            flag = self.received
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                t = torch.tensor([int(flag)], device=args.device)
                torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
                flag = bool(t.item())
            if flag:
                control.should_save = True
                control.should_training_stop = True
                self.stopped_at = state.global_step
            return control

    return CheckpointOnSigterm()


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
    import shutil

    work_dir = Path(work_dir)
    stamp = work_dir / "posbias_run.json"
    wanted = json.dumps(fingerprint, sort_keys=True, default=str)
    if work_dir.is_dir() and (not stamp.is_file() or stamp.read_text() != wanted):
        log.info("checkpoints in %s belong to another run configuration; starting afresh", work_dir)
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(wanted)


def train(base_model: str, instances: pl.DataFrame, spec: TrainSpec, work_dir: Path, out_dir: Path,
          propensity: np.ndarray | None = None, device: str = "cpu") -> pl.DataFrame:
    """Train, resuming from the last checkpoint in ``work_dir`` if any; save the final model to ``out_dir``.

    Listwise methods take LISTWISE instances and ω (k × k) as ``propensity``; pointwise methods
    take POINTWISE instances and the teacher's slot propensity π (B,) (used by
    ``debiasfirst_pointwise`` only). Returns the loss curve (schema LOSS_CURVE). With LoRA the
    adapters are merged into the base weights before saving, so the result loads like any checkpoint.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, set_seed

    from posbias.rerankers.lm import identifier_token_ids

    set_seed(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.bfloat16 if spec.bf16 else torch.float32)
    if spec.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(
            r=spec.lora.get("r", 16), lora_alpha=spec.lora.get("alpha", 32), lora_dropout=spec.lora.get("dropout", 0.05),
            target_modules=spec.lora.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"]),
            task_type="CAUSAL_LM"))
    if spec.pointwise:
        from posbias.scoring import GradesEncoder
        from posbias.silver import slot_weights

        encoder = GradesEncoder(tokenizer, spec.word_budget, spec.max_context)
        id_tokens = list(encoder.grades.ids)
        examples = instances.select("query_id", "window", "query", "doc_ids", "texts", "targets").to_dicts()
        weights = slot_weights(propensity, spec.ips_clip) if propensity is not None else None
        collator = ocsft.GradesCollator(encoder, spec.method, spec.views, spec.seed, tokenizer.pad_token_id, weights)
    else:
        id_tokens = identifier_token_ids(tokenizer)
        examples = encode_instances(tokenizer, instances, spec.word_budget, spec.max_context, spec.prompt,
                                    spec.lm_tokens)
        collator = ListwiseCollator(tokenizer.pad_token_id)
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
    omega = torch.tensor(propensity, dtype=torch.float32) if propensity is not None and not spec.pointwise else None
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:  # torchrun jobs are claimed once, by the launcher
        claim_work_dir(work_dir, run_fingerprint(base_model, spec, instances, propensity))
    trainer = _trainer_class()(
        model=model, args=args, train_dataset=examples, data_collator=collator,
        id_tokens=id_tokens, spec=spec, propensity=omega,
    )
    resume = last_checkpoint(work_dir)
    if resume:
        log.info("resuming from %s", resume)
    preemption = _preemption_callback()
    trainer.add_callback(preemption)
    try:
        trainer.train(resume_from_checkpoint=resume)
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
    if spec.lora:
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
        import shutil

        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return loss_curve(trainer.state.log_history)


def launch_distributed(n_gpus: int, base_model: str, instances: pl.DataFrame, spec: TrainSpec, work_dir: Path,
                       out_dir: Path, propensity: np.ndarray | None, curve: Path) -> None:
    """Run :func:`main` under torchrun on ``n_gpus`` GPUs of this node (inside one SLURM allocation).

    The instances and the propensity go to files beside ``work_dir`` (which may be reset) for the
    worker processes. Multi-node jobs would start one such launcher per node with ``srun`` and a
    shared rendezvous (``--rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 --nnodes
    $SLURM_NNODES``); see README.
    """
    import subprocess
    import sys

    from posbias import schemas

    claim_work_dir(work_dir, run_fingerprint(base_model, spec, instances, propensity))
    data = work_dir.with_name(f"{work_dir.name}.instances.parquet")
    schemas.write(instances, data, instance_schema(spec))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n_gpus}",
           "-m", "posbias.training", "--base-model", base_model, "--data", str(data), "--spec",
           json.dumps(spec.__dict__), "--work-dir", str(work_dir), "--out-dir", str(out_dir), "--curve", str(curve)]
    if propensity is not None:
        saved = work_dir.with_name(f"{work_dir.name}.propensity.npy")
        np.save(saved, np.asarray(propensity, dtype=np.float64))
        cmd += ["--propensity", str(saved)]
    log.info("launching %s", " ".join(cmd))
    subprocess.run(cmd, check=True)


def instance_schema(spec: TrainSpec) -> str:
    """The declared schema of a method's training instances."""
    return "pointwise" if spec.pointwise else "listwise"


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


LOSS_PARTS = ("rank_loss", "lm_loss", "supervised_loss", "consistency_loss", "learning_rate")


def loss_curve(history: list[dict]) -> pl.DataFrame:
    """The logged steps of a ``Trainer`` history (schema LOSS_CURVE); parts a method lacks are NaN."""
    rows = [{"step": int(h["step"]), "loss": float(h["loss"]), **{k: float(h.get(k, math.nan)) for k in LOSS_PARTS}}
            for h in history if "loss" in h and "step" in h]
    return pl.DataFrame(rows, schema={"step": pl.Int64, "loss": pl.Float64, **{k: pl.Float64 for k in LOSS_PARTS}})


if __name__ == "__main__":
    main()
