"""Listwise training (First, DebiasFirst and the ablations): examples, collator and the objective.

Each training example is one listwise instance: the prompt of :mod:`posbias.prompts` ending with the
assistant's opening ``[`` (exactly what First inference reads), followed by the teacher's ranking
``B] > [A] > … ]`` and EOS. The model is trained on

    rank_weight · L_rank(-IPS) + lm_weight · L_LM

with the terms a method names (:mod:`posbias.methods`: ``terms``, from :data:`TERMS`; ``ips``
weights the rank term), where the rank
scores are the logits of the identifier tokens at the position of that opening ``[`` (the same
position inference reads) and L_LM is the token-mean NLL of the ranking string.
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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from posbias import losses
from posbias.augment import gold_ranks
from posbias.prompts import identifiers, render
from posbias.rerankers.lm import identifier_token_ids, readout
from posbias.training.families import Setup
from posbias.training.spec import TrainSpec


def target_text(doc_ids: list[str], teacher_ranking: list[str]) -> str:
    """The ranking string after the opening bracket: ``B] > [A] > [C]``."""
    letters = identifiers(len(doc_ids))
    index = {d: i for i, d in enumerate(doc_ids)}
    return "] > [".join(letters[index[d]] for d in teacher_ranking) + "]"


def encode_instances(tokenizer, instances: pl.DataFrame, word_budget: int, max_context: int,
                     style: str = "rankzephyr", lm_tokens: int | None = None) -> list[dict]:
    """Tokenised examples: input_ids, labels (-100 on the prompt), rank_position, gold_rank.

    The answer is tokenised *in context*: prompt and ranking string as one text, the answer's ids
    being what follows the prompt's own ids. Tokenised on its own, ``B] > [A]`` starts with ``▁B``
    under SentencePiece-style tokenizers (Llama, Mistral, Zephyr), not the ``B`` that follows ``[``
    in the prompt and that the rank loss and First inference read. A tokenizer that merges the
    prompt's last ``[`` with the answer cannot be trained this way and is refused.

    An example fits ``max_context`` with its answer: passages are cut (never the answer) until the
    prompt leaves the answer's tokens room; ``truncated`` counts the passages cut.

    ``lm_tokens``: keep only the first N answer tokens (None: the whole ranking and EOS)."""
    prefix = readout(tokenizer, style).prefix  # "[" (FIRST's), or " [" where "[" merges with a letter
    examples = []
    for rec in instances.iter_rows(named=True):
        answer, budget = target_text(rec["doc_ids"], rec["teacher_ranking"]), max_context
        while True:  # at most twice: the second pass leaves the answer's tokens room in the context
            prompt = render(tokenizer, rec["query"], rec["texts"], word_budget, budget, answer_prefix=prefix,
                            style=style)
            prompt_ids = prompt.input_ids or tokenizer(prompt.text, add_special_tokens=True)["input_ids"]
            full = tokenizer(prompt.text + answer, add_special_tokens=True)["input_ids"]
            if full[: len(prompt_ids)] != prompt_ids:
                raise ValueError(f"query {rec['query_id']}: the prompt's tokens change when the answer follows it "
                                 f"({tokenizer.convert_ids_to_tokens(prompt_ids[-2:])} → "
                                 f"{tokenizer.convert_ids_to_tokens(full[len(prompt_ids) - 2:len(prompt_ids) + 1])}); "
                                 "this tokenizer merges '[' with the identifier, which First cannot read")
            target_ids = (full[len(prompt_ids):] + [tokenizer.eos_token_id])[:lm_tokens]
            if not max_context or len(prompt_ids) + len(target_ids) <= max_context or budget < max_context:
                break
            budget = max_context - len(target_ids)
        examples.append({
            "input_ids": prompt_ids + target_ids,
            # the opening bracket is trained too: it is the prompt's last token and the answer's first
            "labels": [-100] * (len(prompt_ids) - 1) + [prompt_ids[-1]] + target_ids,
            "rank_position": len(prompt_ids) - 1,
            "gold_rank": gold_ranks(rec["doc_ids"], rec["teacher_ranking"]),
            "truncated": prompt.truncated,  # passages cut to fit the word budget and the context
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


@dataclass(frozen=True)
class ObjectiveTerm:
    """One term of the listwise objective: ``compute(logits, rank_logits, batch, spec, propensity)`` returns
    the term's value and any further parts to log; ``weight`` is the ``hyper`` key of its weight (None:
    weight 1); ``logged`` the name its value is logged under."""

    compute: Callable
    weight: str | None
    logged: str


def _rank_term(logits, rank_logits, batch: dict, spec: TrainSpec, propensity) -> tuple[torch.Tensor, dict]:
    """First's rank loss, or with the method's ``ips`` its IPS-weighted form (and the weights' statistics)."""
    rank_terms, ips_stats = [], []
    for i in range(logits.shape[0]):
        valid = batch["gold_rank"][i] >= 0
        k = int(valid.sum())
        scores, gold = rank_logits[i, :k], batch["gold_rank"][i, :k]
        if spec.method_entry.ips:
            if propensity is None or propensity.shape[0] != k:
                raise ValueError(f"method {spec.method} needs a {k}x{k} propensity matrix")
            omega = propensity.to(scores.device)
            rank_terms.append(losses.rank_ips_loss(scores, gold, omega, spec.ips_clip, spec.ips_floor,
                                                   spec.ips_normalize))
            ips_stats.append(losses.ips_weight_stats(gold, omega, spec.ips_clip, spec.ips_floor, spec.ips_normalize))
        else:
            rank_terms.append(losses.first_rank_loss(scores, gold))
    extra = {}
    if ips_stats:
        extra = {key: float(np.nanmean([s[key] for s in ips_stats]))
                 for key in ("ips_clipped_share", "ips_weight_mean")}
        extra["ips_weight_max"] = float(np.nanmax([s["ips_weight_max"] for s in ips_stats]))
    return torch.stack(rank_terms).mean(), extra


def _lm_term(logits, rank_logits, batch: dict, spec: TrainSpec, propensity) -> tuple[torch.Tensor, dict]:
    """The LM loss: over the ranking's tokens, or (``lm_softmax: identifiers``) the first identifier's
    cross-entropy over the window's identifiers."""
    if spec.lm_softmax == "identifiers":
        return losses.first_identifier_loss(rank_logits, batch["gold_rank"]), {}
    return losses.lm_loss(logits, batch["labels"]), {}


# The terms a listwise method may name (posbias.methods.TrainingMethod.terms), in the order they are summed.
TERMS: dict[str, ObjectiveTerm] = {
    "rank": ObjectiveTerm(_rank_term, "rank_weight", "rank_loss"),
    "lm": ObjectiveTerm(_lm_term, "lm_weight", "lm_loss"),
}


def objective(logits: torch.Tensor, batch: dict, id_tokens: list[int], spec: TrainSpec,
              propensity: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
    """The joint loss of one batch (the weighted sum of the method's terms), and its parts for logging."""
    parts: dict[str, float] = {}
    total = logits.new_zeros(())
    rows = torch.arange(logits.shape[0], device=logits.device)
    rank_logits = logits[rows, batch["rank_position"]][:, id_tokens].float()
    for name in spec.method_entry.terms:
        term = TERMS[name]
        value, extra = term.compute(logits, rank_logits, batch, spec, propensity)
        parts[term.logged] = float(value.detach())
        parts.update(extra)
        total = total + (getattr(spec, term.weight) if term.weight else 1.0) * value
    return total, parts


log = logging.getLogger(__name__)


def read_inputs(files, spec: TrainSpec, job_log: logging.Logger) -> tuple[pl.DataFrame, np.ndarray | None]:
    """The family's ``read``: the augmented listwise instances, and ω where the method reads it."""
    from posbias import propensity, schemas

    omega = files.get("omega")  # the job's named inputs (snakemake's Namedlist, or a dict)
    return (schemas.read(files["data"], "listwise"),
            propensity.from_frame(schemas.read(omega, "omega")) if omega else None)


def setup(tokenizer, instances: pl.DataFrame, spec: TrainSpec, propensity: np.ndarray | None) -> Setup:
    """The family's ``setup``: encoded examples, the padding collator, the identifier tokens the rank loss
    reads, and ω as a tensor."""
    examples = encode_instances(tokenizer, instances, spec.word_budget, spec.max_context, spec.prompt, spec.lm_tokens)
    log.info("%d of %d training lists had passages cut to fit the word budget and max_context (%d passages)",
             sum(e["truncated"] > 0 for e in examples), len(examples), sum(e["truncated"] for e in examples))
    omega = torch.tensor(propensity, dtype=torch.float32) if propensity is not None else None
    return Setup(examples, ListwiseCollator(tokenizer.pad_token_id), identifier_token_ids(tokenizer, spec.prompt),
                 omega)


def trainer_objective(model, batch: dict, trainer) -> tuple[torch.Tensor, dict[str, float], object]:
    """The family's ``objective``: :func:`objective` on the model's logits."""
    outputs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    loss, parts = objective(outputs.logits, batch, trainer.id_tokens, trainer.spec, trainer.propensity)
    return loss, parts, outputs
