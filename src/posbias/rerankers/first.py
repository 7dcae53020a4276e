"""FIRST single-token listwise ranking (Reddy et al., 2024).

One forward pass per window: the prompt ends with the assistant's opening ``[``, and the logits of
the next token over the identifier tokens [A] … give one score per passage; sorting them gives the
ranking. Only the last position's logits are computed (``logits_to_keep=1``). The per-passage
scores are kept, because calibration methods (CapCal, BSC) need them.
"""

from __future__ import annotations

from posbias.prompts import render
from posbias.rerankers.base import Reranker, Window, WindowResult, by_score
from posbias.rerankers.lm import (
    LMSpec,
    batches_by_length,
    identifier_token_ids,
    load,
    pad_left,
)


class FirstReranker(Reranker):
    capcal = "single_step"

    def __init__(self, spec: LMSpec):
        super().__init__()
        self.spec = spec
        self.tokenizer, self.model = load(spec)
        self.id_tokens = identifier_token_ids(self.tokenizer)
        self.stats = {"forward_passes": 0, "prompt_tokens": 0, "truncated_passages": 0}
        self._prior_cache: dict[tuple[str, int, str], list[float]] = {}

    def encode(self, window: Window) -> list[int]:
        prompt = render(self.tokenizer, window.query, window.texts, self.spec.word_budget,
                        self.spec.max_context, answer_prefix="[", style=self.spec.prompt)
        self.stats["truncated_passages"] += prompt.truncated
        return prompt.input_ids or self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"]

    def calibration_inputs(self, windows: list[Window], placeholder: str) -> list[tuple[list[float], list[float], dict]]:
        """(P(d | x), P(d | x_empty), cost) per window: softmax of the identifier logits of the real prompt and
        of the same prompt with every passage replaced by ``placeholder``. The content-free prior depends only
        on (query, window size), so it is computed once per pair and cached; its cost is charged to the first
        window that needed it.
        """
        import numpy as np

        missing = sorted({(w.query, len(w.doc_ids)) for w in windows} - {k[:2] for k in self._prior_cache
                                                                            if k[2] == placeholder})
        prior_cost: dict[tuple[str, int], int] = {}
        if missing:
            empty = [Window("", q, [""] * n, [placeholder] * n) for q, n in missing]
            encoded_empty = [self.encode(w) for w in empty]
            logits = self.identifier_logits(encoded_empty, [n for _, n in missing])
            for (q, n), row, enc in zip(missing, logits, encoded_empty):
                self._prior_cache[(q, n, placeholder)] = row
                prior_cost[(q, n)] = len(enc)

        def softmax(x):
            e = np.exp(np.asarray(x) - np.max(x))
            return (e / e.sum()).tolist()

        encoded = [self.encode(w) for w in windows]
        real = self.identifier_logits(encoded, [len(w.doc_ids) for w in windows])
        out = []
        for r, w, enc in zip(real, windows, encoded):
            extra = prior_cost.pop((w.query, len(w.doc_ids)), None)
            cost = {"calls": 1 + (extra is not None), "prompt_tokens": len(enc) + (extra or 0)}
            out.append((softmax(r), softmax(self._prior_cache[(w.query, len(w.doc_ids), placeholder)]), cost))
        return out

    def identifier_logits(self, encoded: list[list[int]], counts: list[int]) -> list[list[float]]:
        """Logits of the first answer token over each row's identifiers (row i has counts[i] passages)."""
        import torch

        out: list[list[float]] = [[] for _ in encoded]
        with torch.inference_mode():
            for batch in batches_by_length(encoded, self.spec.batch_size):
                ids, mask, positions = pad_left(self.tokenizer, [encoded[i] for i in batch], self.spec.device)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                    logits_to_keep=1).logits[:, -1, :].float()
                self.stats["forward_passes"] += 1
                self.stats["prompt_tokens"] += int(mask.sum())
                for row, i in enumerate(batch):
                    out[i] = logits[row, self.id_tokens[: counts[i]]].tolist()
        return out

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        encoded = [self.encode(w) for w in windows]
        scores = self.identifier_logits(encoded, [len(w.doc_ids) for w in windows])
        return [WindowResult(order=by_score(s), scores=s,
                             stats={"calls": 1, "prompt_tokens": len(enc)}) for s, enc in zip(scores, encoded)]
