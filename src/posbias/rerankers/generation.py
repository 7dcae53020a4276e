"""Generation ranking (RankZephyr-style baseline): greedy decoding of ``[B] > [A] > …``.

The output is parsed leniently, as rank_llm does: identifiers are read in order, duplicates and
identifiers outside the window are dropped, and passages the model never named are appended in
input order. Parse failures (no valid identifier at all) and missing identifiers are counted.
"""

from __future__ import annotations

import re

from posbias.errors import PosbiasError
from posbias.prompts import IDENTIFIERS, identifiers, render
from posbias.rerankers.base import Window, WindowResult
from posbias.rerankers.lm import ListwiseLM, LMSpec, answer_context, identifier_scores, readout

_ID = re.compile(r"\[\s*([A-Z]|\d+)\s*\]")  # word-level tokenizers decode "[ A ]"


def parse_ranking(text: str, n: int, style: str = "letters") -> tuple[list[int], int]:
    """Indices best first, and how many of the n ``style`` identifiers were missing from ``text``."""
    valid = {ident: i for i, ident in enumerate(identifiers(n, style))}
    order: list[int] = []
    for letter in _ID.findall(text):
        idx = valid.get(letter)
        if idx is not None and idx not in order:
            order.append(idx)
    missing = n - len(order)
    order += [i for i in range(n) if i not in order]
    return order, missing


def max_new_tokens(n: int) -> int:
    """The decoding budget for a window of ``n`` passages (``[A] > [B] > …`` takes about 4 tokens each)."""
    return 5 * n + 4


class GenerationReranker(ListwiseLM):
    decodes = True
    priors = "per_step"

    def __init__(self, spec: LMSpec, loaded: tuple | None = None):
        super().__init__(spec, loaded)
        self._steps: list[tuple[int, ...]] | None = None  # step_tokens, read once (rank_with_priors)
        self.stats = {"forward_passes": 0, "prompt_tokens": 0, "generated_tokens": 0, "parse_failures": 0,
                      "missing_ids": 0, "truncated_passages": 0}

    def rank(self, windows: list[Window]) -> list[WindowResult]:
        encoded = []
        for w in windows:  # the prompt leaves room in the context for the longest answer generate() may write
            prompt = render(self.tokenizer, w.query, w.texts, self.spec.word_budget,
                            self.spec.max_context - max_new_tokens(len(w.doc_ids)),
                            style=self.spec.prompt, id_style=self.spec.identifiers)
            self.stats["truncated_passages"] += prompt.truncated
            encoded.append(prompt.input_ids or self.tokenizer(prompt.text, add_special_tokens=True)["input_ids"])
        if self.engine is None:  # counting only (the compute plan): decoding steps are unknown; their bound
            self.stats["prompt_tokens"] += sum(len(e) for e in encoded)
            return [WindowResult(order=list(range(len(w.doc_ids))),
                                 stats={"calls": max_new_tokens(len(w.doc_ids)), "prompt_tokens": len(e)})
                    for w, e in zip(windows, encoded)]
        generated, passes = self.engine.generate(encoded, [max_new_tokens(len(w.doc_ids)) for w in windows],
                                                 self.engine.stop_ids())
        self.stats["forward_passes"] += passes
        self.stats["prompt_tokens"] += sum(len(e) for e in encoded)
        results = []
        for w, tokens, enc in zip(windows, generated, encoded):
            self.stats["generated_tokens"] += len(tokens)
            order, missing = parse_ranking(self.tokenizer.decode(tokens, skip_special_tokens=True), len(w.doc_ids),
                                           self.spec.identifiers)
            failed = int(missing == len(w.doc_ids))
            self.stats["parse_failures"] += failed
            self.stats["missing_ids"] += missing
            results.append(WindowResult(order=order, stats={"missing_ids": missing, "parse_failure": failed,
                                                            "calls": max(len(tokens), 1), "prompt_tokens": len(enc)}))
        return results

    def rank_with_priors(self, windows: list[Window], adjust, placeholder: str) -> list[WindowResult]:
        """Sequential CapCal: constrained decoding that emits only valid, unused identifiers.

        The content-free prior (the prompt with every passage replaced by ``placeholder``) is read once
        per window, over all its identifiers, as the paper costs it ("CapCal 仅需一次额外的前向传播（用于
        估计先验）"). At each step the real prompt's next-identifier distribution is read, both it and
        the prior are renormalised over the passages still to place, ``adjust(p_real, p_empty)`` gives
        the scores and the best remaining passage is emitted: its tokens ``X] > [`` are appended to the
        real prompt as a generating model would emit them (:func:`step_tokens`). Costs one forward pass
        per emitted identifier plus one for the prior (and one per shared prefix of multi-token
        identifiers); each pass reads the whole prefix again (no KV-cache reuse), which the compute plan
        counts.
        """
        import numpy as np
        from scipy.special import softmax

        if self._steps is None:
            self._steps = step_tokens(self.tokenizer, self.spec.prompt, self.spec.identifiers, len(IDENTIFIERS))
        steps, results = self._steps, []
        for w in windows:
            n = len(w.doc_ids)
            answer = sum(len(steps[i]) for i in range(n))  # room for the whole answer the steps append
            prompts = [render(self.tokenizer, w.query, texts, self.spec.word_budget, self.spec.max_context - answer,
                              self.readout.prefix,
                              style=self.spec.prompt, id_style=self.spec.identifiers)
                       for texts in (w.texts, [placeholder] * n)]
            self.stats["truncated_passages"] += prompts[0].truncated
            real, empty = (list(p.input_ids or self.tokenizer(p.text, add_special_tokens=True)["input_ids"])
                           for p in prompts)
            (prior,), costs = identifier_scores(self.engine, [empty], [self.paths[:n]], self.multi_token)
            prior = softmax(prior)  # renormalising its restriction to the remaining passages = their softmax
            remaining, chosen = list(range(n)), []
            calls, tokens = costs[0]
            while remaining:
                (scores,), costs = identifier_scores(self.engine, [real], [[self.paths[i] for i in remaining]],
                                                     self.multi_token)
                calls, tokens = calls + costs[0][0], tokens + costs[0][1]
                empty_here = prior[remaining] / prior[remaining].sum()
                best = remaining[int(np.argmax(adjust(softmax(scores), empty_here)))]
                chosen.append(best)
                remaining.remove(best)
                real = real + list(steps[best])
            self.stats["forward_passes"] += calls
            self.stats["prompt_tokens"] += tokens
            results.append(WindowResult(order=chosen, stats={"calls": calls, "prompt_tokens": tokens}))
        return results


def step_tokens(tokenizer, prompt_style: str, style: str, n: int) -> list[tuple[int, ...]]:
    """The tokens of one decoding step ``X] > [`` for each of the first ``n`` identifiers, tokenised in
    the real prompt's context after the answer's opening bracket (:func:`posbias.rerankers.lm.readout`,
    where the identifier paths are read): what a model emits to name X and open the next identifier."""
    context = answer_context(tokenizer, prompt_style) + readout(tokenizer, prompt_style, style, n).prefix
    base = tokenizer(context, add_special_tokens=True)["input_ids"]
    out = []
    for ident in identifiers(n, style):
        full = tokenizer(f"{context}{ident}] > [", add_special_tokens=True)["input_ids"]
        if full[: len(base)] != base:
            raise PosbiasError(f"tokenizer: identifier {ident!r} after '[' merges with the bracket; it cannot be read")
        out.append(tuple(full[len(base):]))
    return out
