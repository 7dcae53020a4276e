"""Frozen readers of multi-document QA (OC-SFT's second consumer): given a question and the passages
a scorer retained, one answer. ``readers.<name>`` in the config says which (see config/README.md).

- ``causal_lm``: a causal LM (an HF id at paper scale, a tiny local build in tests) prompted with the
  passages and the question (:data:`posbias.prompts.READER_SYSTEM`, the chat template where the
  tokenizer has one, Qwen3 without thinking), greedy decoding, the first line of the reply.
- ``simulated``: no LM; it reads the qrels grades of the passages it is given. It answers correctly
  (the first gold answer) when at least one retained passage is graded ≥ ``relevant_grade`` and they
  make up at least ``min_precision`` of the set; otherwise it copies the text of its best-graded
  passage (ties: the earlier one), and with no passage it answers "". Known answers for tests and
  the toy.

The verdict is the consumer's: SQuAD-style normalised exact match against any gold answer
(:func:`posbias.consumers.exact_match`).
"""

from __future__ import annotations

from posbias.consumers import Question
from posbias.prompts import READER_SYSTEM, truncate_words


class SimulatedReader:
    """Answers from the grades of the passages it is given (see the module docstring)."""

    def __init__(self, grades: dict[str, dict[str, int]], golds: dict[str, list[str]], relevant_grade: int,
                 min_precision: float):
        self.grades, self.golds = grades, golds
        self.relevant_grade, self.min_precision = relevant_grade, min_precision

    def answer(self, questions: list[Question]) -> list[str]:
        out = []
        for q in questions:
            graded = [self.grades.get(q.query_id, {}).get(d, 0) for d, _ in q.passages]
            hits = sum(g >= self.relevant_grade for g in graded)
            if hits and hits / len(graded) >= self.min_precision and self.golds.get(q.query_id):
                out.append(self.golds[q.query_id][0])
            elif q.passages:
                best = max(range(len(graded)), key=lambda i: (graded[i], -i))
                out.append(q.passages[best][1])
            else:
                out.append("")
        return out


class LMReader:
    """A causal LM that answers by greedy decoding (``max_new_tokens``), batched and left-padded."""

    def __init__(self, spec, max_new_tokens: int, loaded: tuple | None = None):
        from posbias.rerankers.lm import load

        self.spec, self.max_new_tokens = spec, max_new_tokens
        self.tokenizer, self.model = loaded or load(spec)

    def prompt(self, question: Question) -> str:
        body = "".join(f"Passage {i}: {truncate_words(text, self.spec.word_budget)[0]}\n"
                       for i, (_, text) in enumerate(question.passages, start=1))
        user = f"{body}\nQuestion: {question.text}\nAnswer:"
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "system", "content": READER_SYSTEM}, {"role": "user", "content": user}],
                tokenize=False, add_generation_prompt=True, enable_thinking=False)
        return f"{READER_SYSTEM}\n\n{user}"

    def answer(self, questions: list[Question]) -> list[str]:
        import torch

        from posbias.engines.hf import batches_by_length, pad_left

        budget = self.spec.max_context - self.max_new_tokens
        encoded = [self.tokenizer(self.prompt(q), add_special_tokens=True)["input_ids"][-budget:] for q in questions]
        out = [""] * len(questions)
        with torch.inference_mode():
            for batch in batches_by_length(encoded, self.spec.batch_size):
                ids, mask, _ = pad_left(self.tokenizer, [encoded[i] for i in batch], self.spec.device)
                generated = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                                max_new_tokens=self.max_new_tokens,
                                                pad_token_id=self.tokenizer.pad_token_id)
                for row, i in enumerate(batch):
                    text = self.tokenizer.decode(generated[row, ids.shape[1]:], skip_special_tokens=True)
                    out[i] = text.strip().split("\n")[0].strip()
        return out


def build(spec: dict, path: str | None, grades: dict[str, dict[str, int]], golds: dict[str, list[str]],
          relevant_grade: int, device: str, word_budget: int, loaded: tuple | None = None):
    """The reader a validated ``readers:`` entry describes (``path`` resolved for causal LMs)."""
    if spec["kind"] == "simulated":
        return SimulatedReader(grades, golds, relevant_grade, spec["min_precision"])
    from posbias.rerankers.lm import LMSpec

    lm = LMSpec(path=path, dtype=spec["dtype"], max_context=spec["max_context"],
                attn_implementation=spec["attn_implementation"], trust_remote_code=spec["trust_remote_code"],
                word_budget=word_budget, batch_size=spec["batch_size"], device=device)
    return LMReader(lm, spec["max_new_tokens"], loaded)
