"""The transformers engine: the model's own forward pass and ``generate``, on left-padded batches.

Prompts are left-padded and bucketed by length so a batch wastes little padding; position ids are
derived from the attention mask so that a left-padded row gets exactly the positions it would get
alone (batch-size invariance).
"""

from __future__ import annotations

from posbias.engines import Engine, eos_ids
from posbias.errors import PosbiasError


class TransformersEngine(Engine):
    """``model`` (an ``AutoModelForCausalLM``) run in batches of ``batch_size`` rows on ``device``."""

    def __init__(self, model, tokenizer, batch_size: int, device: str):
        self.model, self.tokenizer, self.batch_size, self.device = model, tokenizer, batch_size, device

    @classmethod
    def open(cls, spec, tokenizer) -> TransformersEngine:
        """Load ``spec.path``'s weights (:func:`load_model`)."""
        return cls(load_model(spec), tokenizer, spec.batch_size, spec.device)

    def next_token(self, rows: list[list[int]], tokens: list[list[int]], normalise: bool) -> list[list[float]]:
        """One forward pass per batch, the last position's logits only (``logits_to_keep=1``)."""
        import torch

        out: list[list[float]] = [[] for _ in rows]
        with torch.inference_mode():
            for batch in batches_by_length(rows, self.batch_size):
                ids, mask, positions = pad_left(self.tokenizer, [rows[j] for j in batch], self.device)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                    logits_to_keep=1).logits[:, -1, :].float()
                values = torch.log_softmax(logits, dim=-1) if normalise else logits
                for r, j in enumerate(batch):
                    out[j] = values[r, tokens[j]].cpu().tolist()
        return out

    def generate(self, rows: list[list[int]], max_tokens: list[int],
                 stop: set[int]) -> tuple[list[list[int]], int]:
        """``generate`` per batch with the batch's largest budget; a row's continuation ends at its first stop
        token (the rest is padding) or at its own budget (what a batch of shorter windows would have given it),
        and the passes are the batch's decoding steps."""
        import torch

        out: list[list[int]] = [[] for _ in rows]
        passes = 0
        with torch.inference_mode():
            for batch in batches_by_length(rows, self.batch_size):
                ids, mask, _ = pad_left(self.tokenizer, [rows[i] for i in batch], self.device)
                generated = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                                max_new_tokens=max(max_tokens[i] for i in batch),
                                                pad_token_id=self.tokenizer.pad_token_id)
                new = generated[:, ids.shape[1]:]
                passes += new.shape[1]
                for row, i in enumerate(batch):
                    tokens = new[row].tolist()
                    out[i] = tokens[:min(generated_length(tokens, stop), max_tokens[i])]
        return out, passes

    def stop_ids(self) -> set[int]:
        return eos_ids(self.model.generation_config, self.tokenizer)


def load_model(spec):
    """``AutoModelForCausalLM`` for ``spec.path`` with its dtype, attention implementation and
    ``trust_remote_code``, in eval mode on ``spec.device``; a one-line error where it cannot be loaded."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            spec.path, dtype=getattr(torch, DTYPES[spec.dtype]), attn_implementation=spec.attn_implementation,
            trust_remote_code=spec.trust_remote_code,
        )
    except OSError as exc:
        raise PosbiasError(f"model {spec.path!r} cannot be loaded: {str(exc).splitlines()[0]}") from None
    return model.eval().to(spec.device)


DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16"}


def generated_length(row: list[int], stop_ids: set[int]) -> int:
    """Tokens a model generated in one row of ``generate``'s output: up to and including its first stop
    token, or the whole row. Counting the tokens that are not padding would drop the EOS itself where
    the pad token is the EOS (Zephyr's)."""
    for k, token in enumerate(row):
        if token in stop_ids:
            return k + 1
    return len(row)


def batches_by_length(encoded: list[list[int]], batch_size: int) -> list[list[int]]:
    """Indices of ``encoded`` grouped into batches of similar length (longest first)."""
    order = sorted(range(len(encoded)), key=lambda i: (-len(encoded[i]), i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def pad_left(tokenizer, rows: list[list[int]], device: str):
    """input_ids, attention_mask and mask-derived position_ids for a left-padded batch."""
    import torch

    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row)
        mask[i, width - len(row):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)
