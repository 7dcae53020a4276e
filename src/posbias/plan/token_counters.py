"""Tokenizers for counting prompt tokens without a model: a memo of a real one (each prompt tokenised once per
plan) and a rule of thumb where no real tokenizer is at hand.
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from array import array

RULE_OF_THUMB = "rule of thumb (RuleOfThumbTokenizer)"  # the tokenizer column where no real one is at hand


class RuleOfThumbTokenizer:
    """A stand-in tokenizer for a model whose own is not on disk: one token per punctuation mark and
    ``max(1, round(len / 4))`` per word or number (the published rule of thumb of about 4 characters
    per token of English text, OpenAI's "what are tokens"; about 1.2 tokens per English word here).
    It has the interface the prompt code uses (``__call__``, ``convert_ids_to_tokens``, no chat
    template), so an estimate comes from the same rendering as an exact count.
    """

    chat_template = None
    pad_token = eos_token = "</s>"
    _PIECE = re.compile(r"\w+|[^\w\s]")

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [1] if add_special_tokens else []  # a BOS token, as Llama/Mistral tokenizers add
        for chunk in text.split():  # no piece spans whitespace
            ids += self._chunk_ids(chunk)
        return {"input_ids": ids}

    @classmethod
    @functools.lru_cache(maxsize=1 << 17)
    def _chunk_ids(cls, chunk: str) -> tuple[int, ...]:
        """The ids of a whitespace-free chunk (memoised: a plan tokenises the same few thousand words
        millions of times)."""
        ids: list[int] = []
        for piece in cls._PIECE.findall(chunk):
            n = max(1, round(len(piece) / 4)) if piece[0].isalnum() or piece[0] == "_" else 1
            ids += [zlib.crc32(f"{piece}#{i}".encode()) for i in range(n)]
        return tuple(ids)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [str(i) for i in ids]


class MemoTokenizer:
    """A tokenizer whose plain calls, ``tokenizer(text, add_special_tokens=…)["input_ids"]`` (the only
    form the prompt code uses), are memoised by the text's digest; any other call and every attribute
    are the wrapped tokenizer's. A plan renders the same prompts for every model of a tokenizer family
    (a preset's trained variants and model sizes read the same windows), and tokenising them again was
    most of a preset's dry plan. One lives as long as one :func:`plan_orders`."""

    def __init__(self, tokenizer):
        object.__setattr__(self, "_tokenizer", tokenizer)
        object.__setattr__(self, "_memo", {})

    def __call__(self, text, add_special_tokens: bool = True, **kwargs):
        if kwargs or not isinstance(text, str):
            return self._tokenizer(text, add_special_tokens=add_special_tokens, **kwargs)
        key = (hashlib.blake2b(text.encode(), digest_size=16).digest(), add_special_tokens)
        ids = self._memo.get(key)
        if ids is None:  # kept as a compact int array: a preset has tens of thousands of ~2k-token prompts
            ids = array("l", self._tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
            self._memo[key] = ids
        return {"input_ids": ids.tolist()}

    def __getattr__(self, name: str):
        return getattr(self._tokenizer, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._tokenizer, name, value)
