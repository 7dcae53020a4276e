"""The batched pointwise "Grades:" scorer (OC-SFT) as a reranker: one forward pass per window of B
documents, one expected grade per document (the readout is :mod:`posbias.scoring`)."""

from __future__ import annotations

import torch

from posbias.rerankers.base import BuildContext, Reranker, Window, WindowResult, by_score
from posbias.engines.hf import batches_by_length, pad_left
from posbias.rerankers.lm import LMSpec, lm_spec, load
from posbias.scoring import GradesEncoder, grade_scores, slot_grade_logits


class GradesScorer(Reranker):
    """A causal LM read as the batched pointwise grader; ``rank`` sorts each window by score.

    It is ``pointwise``: :func:`posbias.rerank.rerank` cuts lists into contiguous windows of
    ``window`` documents and sorts the whole list by score instead of sliding.
    """

    pointwise = True

    def __init__(self, spec: LMSpec, window: int, loaded: tuple | None = None):
        super().__init__()
        self.spec, self.window = spec, window
        self.tokenizer, self.model = loaded or load(spec)
        self.encoder = GradesEncoder(self.tokenizer, spec.word_budget, spec.max_context)
        self.stats = {"forward_passes": 0, "prompt_tokens": 0, "truncated_passages": 0}

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> GradesScorer:
        return cls(lm_spec(spec, context), spec["grade_window"], context.loaded)

    def scores(self, windows: list[Window]) -> list[tuple[list[float], int]]:
        """(score per document in input order, prompt tokens) for each window."""
        encoded = [self.encoder.encode(w.query, w.texts, w.markers) for w in windows]
        self.stats["truncated_passages"] += sum(e[2] for e in encoded)
        if self.model is None:  # counting only (the compute plan)
            self.stats["forward_passes"] += len(batches_by_length([e[0] for e in encoded], self.spec.batch_size))
            self.stats["prompt_tokens"] += sum(len(e[0]) for e in encoded)
            return [([0.0] * len(e[1]), len(e[0])) for e in encoded]
        out: list[tuple[list[float], int]] = [([], 0)] * len(windows)
        with torch.inference_mode():
            for batch in batches_by_length([e[0] for e in encoded], self.spec.batch_size):
                ids, mask, positions = pad_left(self.tokenizer, [encoded[i][0] for i in batch], self.spec.device)
                width = ids.shape[1]
                b = max(len(encoded[i][1]) for i in batch)
                slots = torch.full((len(batch), b), -1, dtype=torch.long)
                for row, i in enumerate(batch):
                    offset = width - len(encoded[i][0])
                    slots[row, : len(encoded[i][1])] = torch.tensor(encoded[i][1]) + offset
                logits = slot_grade_logits(self.model, ids, mask, slots.to(self.spec.device),
                                           self.encoder.grades.ids, positions)
                scores = grade_scores(logits)
                self.stats["forward_passes"] += 1
                self.stats["prompt_tokens"] += int(mask.sum())
                for row, i in enumerate(batch):
                    out[i] = (scores[row, : len(encoded[i][1])].tolist(), len(encoded[i][0]))
        return out

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        return [WindowResult(order=by_score(s), scores=s,
                             stats={"calls": 1, "prompt_tokens": n}) for s, n in self.scores(windows)]
