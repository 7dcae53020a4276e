"""Pointwise training of the batched "Grades:" scorer: OC-SFT and its baselines (same trainer).

Each training example is one anchor window (B documents in the anchor order the teacher labelled,
:mod:`posbias.silver`, with their silver targets). Per step the collator renders N views of it
(:class:`GradesCollator`), the model scores every view in one forward pass
(:func:`posbias.scoring.slot_grade_logits`), the scores are aligned back by document and
:func:`posbias.losses.ocsft_loss` is applied per window:

The methods (:mod:`posbias.methods`) differ in their ``views``, ``consistency`` and ``ips``:

- ``ocsft``: the anchor view (view 0, itself a seeded permutation of the first-stage window) and
  N − 1 further seeded permutations; the anchor is supervised, and the penalty ties all N together;
  consistency weight λ, warmed up linearly over ``consistency_warmup`` steps; ``consistency_form``
  the variance (paper) or pairwise (reference code) penalty.
- ``ocsft_no_anchor``: as ``ocsft`` with every view supervised (the mean error over views): the
  ablation of the anchor.
- ``single_order``: the anchor view alone, λ = 0 (so OC-SFT with λ = 0 is exactly single order).
- ``order_averaged``: as single_order, on targets averaged over T teacher shuffles (data side).
- ``perm_aug``: one seeded random view per step, no penalty.
- ``marker_sft``: the anchor view alone, its slots labelled by a seeded relabelling of ``[1] … [B]`` drawn
  anew every epoch (marker-diverse SFT).
- ``ocsft_markers``: OC-SFT with one view more, the anchor's order with its markers relabelled (a seeded
  permutation of ``[1] … [B]``), so the penalty also ties a marker renaming (the marker penalty).
- ``ocsft_ema``: OC-SFT whose penalty centres each document on an EMA mean teacher's mean score over the
  views (:mod:`posbias.training.ema`) instead of the student's own: the paper's failed ablation.
- ``debiasfirst_pointwise``: the anchor view alone, the supervised term of the document in slot p weighted
  by 1/π(p), π the teacher's slot propensity (:func:`posbias.silver.slot_propensity`), clipped at
  ``ips_clip`` and normalised to mean 1: DebiasFirst's inverse-propensity idea in this setting.

The anchor is seeded by (config seed, query id, window) in the silver stage; the further views by
(run seed, query id, window, view): a window keeps its views in every epoch, as a fixed training
set would (``resample_views`` draws them anew each epoch, seeding with the epoch too; ``perm_aug``'s
one view is always drawn anew: it is augmentation). A resumed run sees the same views as an
uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import torch

from posbias import losses
from posbias.methods import TrainingMethod
from posbias.permute import derive_seed, fisher_yates
from posbias.scoring import GradesEncoder, grade_scores, slot_grade_logits
from posbias.training import ema
from posbias.training.families import Setup


def view_orders(method: TrainingMethod, n_docs: int, views: int, seed: int, query_id: str, window: int,
                epoch: int, resample: bool = False) -> list[list[int]]:
    """The document order (indices into the stored window) of every view of one example.

    The stored window is the anchor view (the teacher labelled that presentation,
    :func:`posbias.silver.anchor_order`), so view 0 is the identity; ``anchor+permutations`` adds
    ``views − 1`` seeded permutations of it, and a method with the marker penalty the anchor's order once
    more (its markers relabelled, :func:`view_markers`); ``one_permutation`` is one permutation drawn anew
    every epoch (augmentation)."""
    def shuffled(view: int, by_epoch: bool) -> list[int]:
        parts = (epoch, view) if by_epoch else (view,)
        return fisher_yates(list(range(n_docs)), derive_seed(seed, "ocsft-view", query_id, window, *parts))

    if method.views == "one_permutation":
        return [shuffled(0, by_epoch=True)]
    count = views if method.views == "anchor+permutations" else 1
    marker_view = [list(range(n_docs))] if method.markers == "penalty" else []  # relabelled: view_markers
    return [list(range(n_docs))] + [shuffled(v, by_epoch=resample) for v in range(1, count)] + marker_view


def view_markers(method: TrainingMethod, n_docs: int, count: int, seed: int, query_id: str, window: int,
                 epoch: int) -> list[tuple[int, ...] | None]:
    """The slot markers of each of ``count`` views (None: ``[1] … [B]`` in slot order), per the method's
    ``markers``: ``fixed`` none relabelled; ``drawn`` every view a seeded relabelling drawn anew each epoch;
    ``penalty`` the last view (the marker view of :func:`view_orders`) relabelled, fixed for the run as the
    order views are. The seeds are the views' own ("markers" instead of "ocsft-view")."""
    def relabelled(view: int, by_epoch: bool) -> tuple[int, ...]:
        parts = (epoch, view) if by_epoch else (view,)
        return tuple(fisher_yates(range(1, n_docs + 1), derive_seed(seed, "markers", query_id, window, *parts)))

    if method.markers == "drawn":
        return [relabelled(v, by_epoch=True) for v in range(count)]
    if method.markers == "penalty":
        return [None] * (count - 1) + [relabelled(count - 1, by_epoch=False)]
    return [None] * count


class GradesCollator:
    """Renders the views of a batch of windows; ``epoch`` is advanced by the trainer every epoch."""

    def __init__(self, encoder: GradesEncoder, method: TrainingMethod, views: int, seed: int, pad_token_id: int,
                 slot_weights: np.ndarray | None = None, resample_views: bool = False):
        self.encoder, self.method, self.views, self.seed, self.pad = encoder, method, views, seed, pad_token_id
        self.slot_weights, self.resample_views = slot_weights, resample_views
        self.epoch = 0

    def __call__(self, batch: list[dict]) -> dict[str, torch.Tensor]:
        rows, slots, docs, owner = [], [], [], []
        b = max(len(ex["doc_ids"]) for ex in batch)
        targets = torch.full((len(batch), b), float("nan"))
        weights = torch.ones((len(batch), b))
        for w, ex in enumerate(batch):
            n = len(ex["doc_ids"])
            targets[w, :n] = torch.tensor(ex["targets"], dtype=torch.float32)
            orders = view_orders(self.method, n, self.views, self.seed, ex["query_id"], ex["window"], self.epoch,
                                 self.resample_views)
            if self.slot_weights is not None:  # document orders[0][p] sits in slot p of the supervised view
                weights[w, torch.tensor(orders[0])] = torch.tensor(self.slot_weights[:n], dtype=torch.float32)
            markers = view_markers(self.method, n, len(orders), self.seed, ex["query_id"], ex["window"], self.epoch)
            for order, labels in zip(orders, markers):
                ids, reads, _ = self.encoder.encode(ex["query"], [ex["texts"][i] for i in order], labels)
                rows.append(ids)
                slots.append(reads)
                docs.append(order)
                owner.append(w)
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        slot_t = torch.full((len(rows), b), -1, dtype=torch.long)
        doc_t = torch.full((len(rows), b), -1, dtype=torch.long)
        for r, (row, reads, order) in enumerate(zip(rows, slots, docs)):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
            slot_t[r, : len(reads)] = torch.tensor(reads)
            doc_t[r, : len(order)] = torch.tensor(order)
        return {"input_ids": ids, "attention_mask": mask, "slots": slot_t, "doc_of_slot": doc_t,
                "window_of_row": torch.tensor(owner), "targets": targets, "weights": weights}


def aligned_view_scores(scores: torch.Tensor, batch: dict, window: int) -> torch.Tensor:
    """N × B scores of one window's views, each reordered to the canonical document order."""
    rows = (batch["window_of_row"] == window).nonzero().flatten()
    n = int((~torch.isnan(batch["targets"][window])).sum())
    out = []
    for r in rows:
        doc = batch["doc_of_slot"][r, :n].to(scores.device)
        aligned = torch.empty(n, dtype=scores.dtype, device=scores.device)
        out.append(aligned.index_copy(0, doc, scores[r, :n]))
    return torch.stack(out)


def batch_scores(model, batch: dict, grade_ids) -> torch.Tensor:
    """Every rendered view's slot scores (rows × B): one forward pass of the batch."""
    return grade_scores(slot_grade_logits(model, batch["input_ids"], batch["attention_mask"], batch["slots"], grade_ids))


def pointwise_objective(model, batch: dict, grade_ids, method: TrainingMethod, lam: float,
                        form: str = "variance", teacher_scores: torch.Tensor | None = None,
                        ) -> tuple[torch.Tensor, dict[str, float]]:
    """The mean OC-SFT loss over the batch's windows (λ forced to 0 for methods without the
    consistency term; ``form`` the penalty's, :func:`posbias.losses.ocsft_terms`), and its two terms.
    ``teacher_scores`` (the EMA teacher's scores of the same rows, :mod:`posbias.training.ema`): the penalty
    centres each document on the teacher's mean over the views instead of the student's."""
    scores = batch_scores(model, batch, grade_ids)
    lam = lam if method.consistency else 0.0
    weighted = method.ips
    supervised, spread = [], []
    for w in range(batch["targets"].shape[0]):
        views = aligned_view_scores(scores, batch, w)
        n = views.shape[1]
        target = batch["targets"][w, :n].to(views.device)
        centre = aligned_view_scores(teacher_scores, batch, w).mean(0) if teacher_scores is not None else None
        sup, spr = losses.ocsft_terms(views, target, batch["weights"][w, :n].to(views.device) if weighted else None,
                                      form, method.anchor, centre)
        supervised.append(sup)
        spread.append(spr)
    sup, spr = torch.stack(supervised).mean(), torch.stack(spread).mean()
    return sup + lam * spr, {"supervised_loss": float(sup.detach()), "consistency_loss": float(spr.detach()),
                             "lambda": lam}


def read_inputs(files, spec, job_log) -> tuple:
    """The family's ``read``: the training windows of the silver labels (targets averaged over the teacher's
    shuffles where the method says so), and the teacher's slot propensity where the method weights by it."""
    from posbias import schemas, silver

    labels = schemas.read(files["data"], "silver")
    instances = silver.instances(labels, schemas.read(files["queries"], "queries"),
                                 schemas.read(files["corpus"], "corpus"), averaged=spec.method_entry.averaged_targets)
    if not spec.method_entry.ips:
        return instances, None
    prop = silver.slot_propensity(labels, int(labels["slot"].max()) + 1)
    job_log.info("slot propensity of the teacher: %s", [round(float(x), 3) for x in prop])
    return instances, prop


def setup(tokenizer, instances, spec, propensity) -> Setup:
    """The family's ``setup``: the windows as examples, the view-rendering collator (with the slot weights of
    the propensity, if any), and the grade tokens the objective reads."""
    from posbias.silver import slot_weights

    encoder = GradesEncoder(tokenizer, spec.word_budget, spec.max_context)
    examples = instances.select("query_id", "window", "query", "doc_ids", "texts", "targets").to_dicts()
    weights = slot_weights(propensity, spec.ips_clip) if propensity is not None else None
    collator = GradesCollator(encoder, spec.method_entry, spec.views, spec.seed, tokenizer.pad_token_id, weights,
                              spec.resample_views)
    callbacks = (ema.EmaTeacher(spec.ema_decay),) if spec.method_entry.ema_teacher else ()
    return Setup(examples, collator, list(encoder.grades.ids), callbacks=callbacks)


def trainer_objective(model, batch: dict, trainer) -> tuple:
    """The family's ``objective``: :func:`pointwise_objective` at the step's λ (warmed up), with the EMA
    teacher's scores for a method that centres its penalty on them."""
    spec = trainer.spec
    lam = losses.consistency_weight(trainer.state.global_step, spec.consistency, spec.consistency_warmup)
    teacher = (ema.of(trainer).scores(model, lambda m: batch_scores(m, batch, trainer.id_tokens))
               if spec.method_entry.ema_teacher else None)
    loss, parts = pointwise_objective(model, batch, trainer.id_tokens, spec.method_entry, lam, spec.consistency_form,
                                      teacher)
    return loss, parts, None
