"""FIRST single-token listwise ranking (Reddy et al., 2024).

One forward pass per window: the prompt ends with the assistant's opening ``[``, and the logits of
the next token over the identifier tokens [A] … give one score per passage (where a tokenizer merges
``[`` with a letter there, Qwen's, the prompt ends with `` [`` instead: :func:`posbias.rerankers.lm.readout`); sorting them gives the
ranking. Only the last position's logits are computed (``logits_to_keep=1``). The per-passage
scores are kept, because calibration methods (CapCal, BSC) need them.

With numeric identifiers (``identifiers: numbers``, [1] … [20]) an identifier may span several
tokens; its score is then the log-probability of its whole path (:func:`posbias.rerankers.lm.identifier_scores`),
at one extra forward pass per shared prefix.
"""

from __future__ import annotations

from posbias.prompts import render
from posbias.rerankers.base import Window, WindowResult, by_score
from posbias.rerankers.lm import ListwiseLM, LMSpec, identifier_scores


class FirstReranker(ListwiseLM):
    priors = "per_window"

    def __init__(self, spec: LMSpec, loaded: tuple | None = None):
        super().__init__(spec, loaded)
        self.stats = {"forward_passes": 0, "prompt_tokens": 0, "truncated_passages": 0}
        self._prior_cache: dict[tuple[str, int, str], list[float]] = {}

    def reset_stats(self) -> None:
        """Zero the counters and forget the cached content-free priors, so each order pays for its own
        (its cost then does not depend on which orders share its job)."""
        super().reset_stats()
        self._prior_cache.clear()

    def encode(self, window: Window) -> list[int]:
        prompt = render(self.tokenizer, window.query, window.texts, self.spec.word_budget,
                        self.spec.max_context, answer_prefix=self.readout.prefix, style=self.spec.prompt,
                        id_style=self.spec.identifiers)
        self.stats["truncated_passages"] += prompt.truncated
        return prompt.input_ids or self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"]

    def content_free_inputs(self, windows: list[Window],
                            placeholder: str) -> list[tuple[list[float], list[float], dict]]:
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
            logits, costs = self.identifier_logits(encoded_empty, [n for _, n in missing])
            for (q, n), row, cost in zip(missing, logits, costs):
                self._prior_cache[(q, n, placeholder)] = row
                prior_cost[(q, n)] = cost

        def softmax(x):
            e = np.exp(np.asarray(x) - np.max(x))
            return (e / e.sum()).tolist()

        encoded = [self.encode(w) for w in windows]
        real, costs = self.identifier_logits(encoded, [len(w.doc_ids) for w in windows])
        out = []
        for r, w, (calls, tokens) in zip(real, windows, costs):
            extra_calls, extra_tokens = prior_cost.pop((w.query, len(w.doc_ids)), (0, 0))
            cost = {"calls": calls + extra_calls, "prompt_tokens": tokens + extra_tokens}
            out.append((softmax(r), softmax(self._prior_cache[(w.query, len(w.doc_ids), placeholder)]), cost))
        return out

    def identifier_logits(self, encoded: list[list[int]], counts: list[int]) -> tuple[list[list[float]], list]:
        """Scores of each row's identifiers (row i has counts[i] passages), and each row's (calls, tokens)."""
        scores, costs = identifier_scores(self.engine, encoded, [self.paths[:n] for n in counts], self.multi_token)
        self.stats["forward_passes"] += sum(c for c, _ in costs)
        self.stats["prompt_tokens"] += sum(t for _, t in costs)
        return scores, costs

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        encoded = [self.encode(w) for w in windows]
        scores, costs = self.identifier_logits(encoded, [len(w.doc_ids) for w in windows])
        return [WindowResult(order=by_score(s), scores=s, stats={"calls": calls, "prompt_tokens": tokens})
                for s, (calls, tokens) in zip(scores, costs)]
