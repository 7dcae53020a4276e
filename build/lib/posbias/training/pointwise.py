"""Pointwise training of the batched "Grades:" scorer: OC-SFT and its baselines (same trainer).

Each training example is one canonical window (B documents, silver targets). Per step the collator
renders N views of it (:class:`GradesCollator`), the model scores every view in one forward pass
(:func:`posbias.scoring.slot_grade_logits`), the scores are aligned back by document and
:func:`posbias.losses.ocsft_loss` is applied per window:

The methods (:mod:`posbias.methods`) differ in their ``views``, ``consistency`` and ``ips``:

- ``ocsft``: view 0 = the first-stage order (supervised), views 1 … N−1 seeded permutations;
  consistency weight λ, warmed up linearly over ``consistency_warmup`` steps.
- ``single_order``: view 0 alone, λ = 0.
- ``order_averaged``: as single_order, on targets averaged over T teacher shuffles (data side).
- ``perm_aug``: one seeded random view per step, no penalty.
- ``debiasfirst_pointwise``: view 0 alone, the supervised term of the document in slot p weighted
  by 1/π(p), π the teacher's slot propensity (:func:`posbias.silver.slot_propensity`), clipped at
  ``ips_clip`` and normalised to mean 1: DebiasFirst's inverse-propensity idea in this setting.

View permutations are seeded from (seed, query id, window, epoch, view), so a resumed run sees the
same views as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import torch

from posbias import losses
from posbias.methods import TrainingMethod
from posbias.permute import derive_seed, fisher_yates
from posbias.scoring import GradesEncoder, grade_scores, slot_grade_logits


def view_orders(method: TrainingMethod, n_docs: int, views: int, seed: int, query_id: str, window: int,
                epoch: int) -> list[list[int]]:
    """The document order (indices into the canonical window) of every view of one example."""
    def shuffled(view: int) -> list[int]:
        return fisher_yates(list(range(n_docs)), derive_seed(seed, "ocsft-view", query_id, window, epoch, view))

    if method.views == "one_permutation":
        return [shuffled(0)]
    identity = list(range(n_docs))
    if method.views == "anchor+permutations":
        return [identity] + [shuffled(v) for v in range(1, views)]
    return [identity]


class GradesCollator:
    """Renders the views of a batch of windows; ``epoch`` is advanced by the trainer every epoch."""

    def __init__(self, encoder: GradesEncoder, method: TrainingMethod, views: int, seed: int, pad_token_id: int,
                 slot_weights: np.ndarray | None = None):
        self.encoder, self.method, self.views, self.seed, self.pad = encoder, method, views, seed, pad_token_id
        self.slot_weights = slot_weights
        self.epoch = 0

    def __call__(self, batch: list[dict]) -> dict[str, torch.Tensor]:
        rows, slots, docs, owner = [], [], [], []
        b = max(len(ex["doc_ids"]) for ex in batch)
        targets = torch.full((len(batch), b), float("nan"))
        weights = torch.ones((len(batch), b))
        for w, ex in enumerate(batch):
            n = len(ex["doc_ids"])
            targets[w, :n] = torch.tensor(ex["targets"], dtype=torch.float32)
            if self.slot_weights is not None:
                weights[w, :n] = torch.tensor(self.slot_weights[:n], dtype=torch.float32)
            for order in view_orders(self.method, n, self.views, self.seed, ex["query_id"], ex["window"], self.epoch):
                ids, reads, _ = self.encoder.encode(ex["query"], [ex["texts"][i] for i in order])
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


def pointwise_objective(model, batch: dict, grade_ids, method: TrainingMethod,
                        lam: float) -> tuple[torch.Tensor, dict[str, float]]:
    """The mean OC-SFT loss over the batch's windows (λ forced to 0 for methods without the
    consistency term), and its two terms."""
    logits = slot_grade_logits(model, batch["input_ids"], batch["attention_mask"], batch["slots"], grade_ids)
    scores = grade_scores(logits)
    lam = lam if method.consistency else 0.0
    weighted = method.ips
    supervised, spread = [], []
    for w in range(batch["targets"].shape[0]):
        views = aligned_view_scores(scores, batch, w)
        n = views.shape[1]
        target = batch["targets"][w, :n].to(views.device)
        sup, spr = losses.ocsft_terms(views, target, batch["weights"][w, :n].to(views.device) if weighted else None)
        supervised.append(sup)
        spread.append(spr)
    sup, spr = torch.stack(supervised).mean(), torch.stack(spread).mean()
    return sup + lam * spr, {"supervised_loss": float(sup.detach()), "consistency_loss": float(spr.detach()),
                             "lambda": lam}
