"""The batched pointwise "Grades:" scorer of OC-SFT and its readout: B documents in one prompt, one grade each.

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

The skeleton is tokenised after a real grades prompt, as the tokenizer splits the whole prompt, and
each slot's read position is where the text up to its ``Grade:`` ends; whether the digit token
carries the space (``" 0"``) or the segment does (``": "`` + ``"0"``) is decided once per tokenizer
by :func:`grade_tokens`. :data:`SKELETONS` holds the paper's skeleton and a second one (ours), for the
skeleton channel's probe; both are read at the same digit tokens.

This module is the one home of the Grades format: the readout (prompt skeleton, slot positions, E[g])
that training (:mod:`posbias.training.pointwise`) and inference share, and the reranker that reads a
causal LM with it, :class:`GradesScorer` (the ``grades`` mode of :mod:`posbias.rerankers.modes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from posbias.engines.hf import batches_by_length, pad_left
from posbias.errors import PosbiasError
from posbias.prompts import DEFAULT_SKELETON, SKELETONS, grades_message, render
from posbias.rerankers.base import BuildContext, Reranker, Window, WindowResult, by_score
from posbias.rerankers.lm import LMSpec, lm_spec, load

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


def grade_tokens(tokenizer, label: str = SKELETONS[DEFAULT_SKELETON].label) -> GradeTokens:
    """The digit tokens as they follow ``label:`` (``Grade:``), each exactly one token in context."""
    for tail, lead in ((":", " "), (": ", "")):
        base = tokenizer(f"{label}{tail}", add_special_tokens=False)["input_ids"]
        ids = []
        for g in GRADES:
            full = tokenizer(f"{label}{tail}{lead}{g}", add_special_tokens=False)["input_ids"]
            if full[: len(base)] != base or len(full) != len(base) + 1:
                break
            ids.append(full[-1])
        if len(ids) == len(GRADES) and len(set(ids)) == len(GRADES):
            return GradeTokens(tail, tuple(ids))
    raise PosbiasError(f"tokenizer: the grades 0 1 2 3 after '{label}:' are not single distinct tokens; "
                       "the Grades scorer reads one logit per grade")


class GradesEncoder:
    """Token ids of a grades prompt with its answer skeleton, and the read position of every slot."""

    def __init__(self, tokenizer, word_budget: int, max_context: int | None):
        self.tokenizer, self.word_budget, self.max_context = tokenizer, word_budget, max_context
        self.grades = grade_tokens(tokenizer)
        # a real grades prompt's text up to the answer: the skeleton is tokenised after it, as in the prompt
        self._context = render(tokenizer, "query", ["passage"], 8, message=grades_message).text
        self._context_ids = tokenizer(self._context, add_special_tokens=True)["input_ids"]
        self._skeletons: dict[tuple, tuple[list[int], list[int], int]] = {}
        self._tails = {DEFAULT_SKELETON: self.grades.tail}

    def _tail(self, name: str) -> str:
        """How skeleton ``name``'s label meets its digit; its digits must be the default skeleton's tokens (one
        read for every skeleton), or it is an error."""
        if name not in self._tails:
            if name not in SKELETONS:
                raise ValueError(f"answer skeleton {name!r}: use one of {', '.join(SKELETONS)}")
            own = grade_tokens(self.tokenizer, SKELETONS[name].label)
            if own.ids != self.grades.ids:
                raise PosbiasError(f"tokenizer: the grades after '{SKELETONS[name].label}:' are other tokens than after "
                                   f"'{SKELETONS[DEFAULT_SKELETON].label}:'; skeleton {name!r} cannot be read")
            self._tails[name] = own.tail
        return self._tails[name]

    def skeleton(self, markers: tuple[int, ...], name: str = DEFAULT_SKELETON) -> tuple[list[int], list[int], int]:
        """(ids, read offsets, prompt tokens replaced) of the skeleton ``name``: ``Grades:`` and one line
        ``[m] Grade: 0`` per slot (:data:`SKELETONS`).

        Tokenised in context, after a real grades prompt, as the tokenizer splits the whole text: a
        SentencePiece tokenizer (Zephyr's) gives ``Gr`` after the prompt's newline but ``▁Gr`` alone. Where
        the tokenizer re-splits the prompt's last tokens when text follows (GPT-2-style whitespace: a
        final ``\n\n`` is one token alone, two before a word), the skeleton starts with those tokens as
        re-split and replaces the prompt's: the third value is how many it replaces. A read offset is where
        the text up to a slot's ``Grade:`` ends; the whole skeleton must start with that text's tokens and
        follow them with the placeholder digit, or it is an error. The canonical skeletons (markers
        ``1 … n``) are cached; renamed ones are built each time."""
        if (name, markers) in self._skeletons:
            return self._skeletons[name, markers]
        tok, context, tail = self.tokenizer, self._context_ids, self._tail(name)
        digit = ("" if tail.endswith(" ") else " ") + "0"
        text, partial = SKELETONS[name].header, []
        for m in markers:
            text += f"\n[{m}] {SKELETONS[name].label}{tail}"
            partial.append(tok(self._context + text, add_special_tokens=True)["input_ids"])
            text += digit
        whole = tok(self._context + text, add_special_tokens=True)["input_ids"]
        start = next((k for k, (a, b) in enumerate(zip(context, whole)) if a != b), len(context))
        for m, ids in zip(markers, partial):
            if whole[: len(ids)] != ids or whole[len(ids)] != self.grades.ids[0] or len(ids) <= start:
                raise PosbiasError(f"tokenizer: slot [{m}]'s placeholder grade {digit!r} merges with the skeleton "
                                   f"({tok.convert_ids_to_tokens(whole[len(ids) - 1:len(ids) + 1])}); "
                                   "the Grades scorer cannot read it")
        out = (whole[start:], [len(ids) - 1 - start for ids in partial], len(context) - start)
        if markers == tuple(range(1, len(markers) + 1)):
            self._skeletons[name, markers] = out
        return out

    def encode(self, query: str, passages: list[str], markers: tuple[int, ...] | None = None,
               skeleton: str | None = None) -> tuple[list[int], list[int], int]:
        """(input ids, slot read positions, passages cut to the word budget); ``markers`` label the slots
        in the documents and the answer skeleton alike (default ``1 … n``); ``skeleton`` names the answer
        skeleton (default ``grades``, the paper's)."""
        markers = markers or tuple(range(1, len(passages) + 1))
        if sorted(markers) != list(range(1, len(passages) + 1)):
            raise ValueError(f"markers {markers} are not a permutation of 1 … {len(passages)}")
        skeleton, reads, replaced = self.skeleton(markers, skeleton or DEFAULT_SKELETON)
        budget = self.max_context - len(skeleton) + replaced if self.max_context else None
        prompt = render(self.tokenizer, query, passages, self.word_budget, budget, message=grades_message,
                        markers=markers)
        ids = prompt.input_ids or self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"]
        ids = ids[: len(ids) - replaced]
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


class GradesScorer(Reranker):
    """A causal LM read as the batched pointwise grader; ``rank`` sorts each window by score.

    It is ``pointwise``: :func:`posbias.rerank.rerank` cuts lists into contiguous windows of
    ``window`` documents and sorts the whole list by score instead of sliding.
    """

    pointwise = True
    priors = "per_slot"

    def __init__(self, spec: LMSpec, window: int, loaded: tuple | None = None):
        super().__init__()
        self.spec, self.window = spec, window
        self.tokenizer, self.model = loaded or load(spec)
        self.encoder = GradesEncoder(self.tokenizer, spec.word_budget, spec.max_context)
        self.stats = {"forward_passes": 0, "prompt_tokens": 0, "truncated_passages": 0}
        self._prior_cache: dict[tuple, list[float]] = {}

    def reset_stats(self) -> None:
        """Zero the counters and forget the cached content-free priors, so each order pays for its own."""
        super().reset_stats()
        self._prior_cache.clear()

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> GradesScorer:
        return cls(lm_spec(spec, context), spec["grade_window"], context.loaded)

    def scores(self, windows: list[Window]) -> list[tuple[list[float], int]]:
        """(score per document in input order, prompt tokens) for each window."""
        encoded = [self.encoder.encode(w.query, w.texts, w.markers, w.skeleton) for w in windows]
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

    def content_free_inputs(self, windows: list[Window],
                            placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """(slot scores, the same slots' scores with every passage replaced by ``placeholder``, cost) per window.
        The content-free scores depend only on (query, window size, markers): computed once per key and cached,
        their cost charged to the first window that needed them."""
        def key(w: Window) -> tuple:
            return w.query, len(w.doc_ids), w.markers, w.skeleton, placeholder

        missing = list(dict.fromkeys(key(w) for w in windows if key(w) not in self._prior_cache))
        prior_cost: dict[tuple, tuple[int, int]] = {}
        empty = self.scores([Window("", q, [""] * n, [text] * n, markers, skeleton)
                             for q, n, markers, skeleton, text in missing])
        for k, (scores, tokens) in zip(missing, empty):
            self._prior_cache[k], prior_cost[k] = scores, (1, tokens)
        out = []
        for w, (scores, tokens) in zip(windows, self.scores(windows)):
            calls, extra = prior_cost.pop(key(w), (0, 0))
            out.append((scores, self._prior_cache[key(w)], {"calls": 1 + calls, "prompt_tokens": tokens + extra}))
        return out
