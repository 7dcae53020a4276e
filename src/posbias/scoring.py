"""The batched pointwise "Grades:" readout of OC-SFT: B documents in one prompt, one grade each.

The prompt (:func:`posbias.prompts.grades_message`) numbers the documents ``[1] … [B]`` and asks
for one relevance grade in {0, 1, 2, 3} per document; after the assistant prefix a **fixed answer
skeleton** is appended::

    Grades:
    [1] Grade: 0
    [2] Grade: 0
    …

One forward pass, no sampling: at the position that predicts slot i's grade digit, the logits of
the tokens ``0 1 2 3`` are renormalised over the four, E[g] = Σ g·P(g) and the score is E[g]/3 ∈
[0, 1]. The placeholder digits after each slot are part of the input (causal attention: slot i
sees the placeholders of slots < i, the same in training and inference). Any B works with the
same checkpoint; long lists are cut into contiguous windows of B in the given order.

The skeleton is tokenised piece by piece (``"\\n[i] Grade:"`` and the digit token), so the read
positions are known exactly for any tokenizer; whether the digit token carries the space
(``" 0"``) or the segment does (``": "`` + ``"0"``) is decided once per tokenizer by
:func:`grade_tokens`.

This module is the readout (prompt skeleton, slot positions, E[g]) shared by training and
inference; the reranker that uses it is :class:`posbias.rerankers.grades.GradesScorer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from posbias.errors import PosbiasError
from posbias.prompts import grades_message, render

GRADES = (0, 1, 2, 3)


def grade_scores(grade_logits: torch.Tensor) -> torch.Tensor:
    """E[g]/3 over the last dimension (the four logits of ``0 1 2 3``): the score in [0, 1]."""
    probs = grade_logits.float().softmax(-1)
    return (probs * torch.arange(len(GRADES), dtype=probs.dtype, device=probs.device)).sum(-1) / GRADES[-1]


def expected_grade(grade_logits: Sequence[float]) -> float:
    """E[g] on the 0–3 scale from the four logits of the tokens ``0 1 2 3`` (renormalised over the four)."""
    logits = torch.as_tensor(list(grade_logits), dtype=torch.float64)
    if logits.shape != (len(GRADES),):
        raise ValueError(f"expected_grade needs {len(GRADES)} logits (tokens 0 1 2 3), got {tuple(logits.shape)}")
    return float(grade_scores(logits)) * GRADES[-1]


@dataclass(frozen=True)
class GradeTokens:
    """How a tokenizer writes ``Grade: g``: the segment's tail and the four digit token ids."""

    tail: str  # ":" when the digit token carries the space, ": " when the segment does
    ids: tuple[int, int, int, int]


def grade_tokens(tokenizer) -> GradeTokens:
    """The digit tokens as they follow ``Grade:``, each exactly one token in context."""
    for tail, lead in ((":", " "), (": ", "")):
        base = tokenizer(f"Grade{tail}", add_special_tokens=False)["input_ids"]
        ids = []
        for g in GRADES:
            full = tokenizer(f"Grade{tail}{lead}{g}", add_special_tokens=False)["input_ids"]
            if full[: len(base)] != base or len(full) != len(base) + 1:
                break
            ids.append(full[-1])
        if len(ids) == len(GRADES) and len(set(ids)) == len(GRADES):
            return GradeTokens(tail, tuple(ids))
    raise PosbiasError("tokenizer: the grades 0 1 2 3 after 'Grade:' are not single distinct tokens; "
                       "the Grades scorer reads one logit per grade")


class GradesEncoder:
    """Token ids of a grades prompt with its answer skeleton, and the read position of every slot."""

    def __init__(self, tokenizer, word_budget: int, max_context: int | None):
        self.tokenizer, self.word_budget, self.max_context = tokenizer, word_budget, max_context
        self.grades = grade_tokens(tokenizer)
        self._skeletons: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}

    def skeleton(self, markers: tuple[int, ...]) -> tuple[list[int], list[int]]:
        """(ids, read offsets) of ``Grades:`` and one line ``[m] Grade: 0`` per slot, ``m`` its marker.

        The canonical skeletons (markers ``1 … n``) are cached; renamed ones are built each time."""
        if markers in self._skeletons:
            return self._skeletons[markers]
        ids: list[int] = []
        reads = []
        for line, m in enumerate(markers):
            head = "Grades:\n" if line == 0 else "\n"
            ids += self.tokenizer(f"{head}[{m}] Grade{self.grades.tail}", add_special_tokens=False)["input_ids"]
            reads.append(len(ids) - 1)
            ids.append(self.grades.ids[0])
        if markers == tuple(range(1, len(markers) + 1)):
            self._skeletons[markers] = (ids, reads)
        return ids, reads

    def encode(self, query: str, passages: list[str], markers: tuple[int, ...] | None = None,
               ) -> tuple[list[int], list[int], int]:
        """(input ids, slot read positions, passages cut to the word budget); ``markers`` label the slots
        in the documents and the answer skeleton alike (default ``1 … n``)."""
        markers = markers or tuple(range(1, len(passages) + 1))
        if sorted(markers) != list(range(1, len(passages) + 1)):
            raise ValueError(f"markers {markers} are not a permutation of 1 … {len(passages)}")
        skeleton, reads = self.skeleton(markers)
        budget = self.max_context - len(skeleton) if self.max_context else None
        prompt = render(self.tokenizer, query, passages, self.word_budget, budget, message=grades_message,
                        markers=markers)
        ids = prompt.input_ids or self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"]
        return ids + skeleton, [len(ids) + r for r in reads], prompt.truncated


def slot_grade_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, slots: torch.Tensor,
                      grade_ids: Sequence[int], position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """(rows, B, 4) logits of the grade tokens at each row's slot positions (``slots``: rows × B, −1 = none).

    The LM head runs only at the positions some row reads (``logits_to_keep`` as an index tensor),
    so a large vocabulary costs B columns, not the whole sequence.
    """
    keep = torch.unique(slots[slots >= 0])
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   logits_to_keep=keep).logits
    column = torch.searchsorted(keep, slots.clamp_min(0))
    rows = torch.arange(slots.shape[0], device=slots.device).unsqueeze(-1)
    return logits[rows, column][..., list(grade_ids)]
