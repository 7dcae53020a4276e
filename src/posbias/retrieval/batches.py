"""Encoder batches of similar length.

An encoder pads each batch to its longest text, so batches cut from the corpus in its own order carry the padding
of their longest passage; batches of texts sorted by length carry almost none (sentence-transformers' ``encode``
sorts the same way). pyserini's encoders take the batches as given, hence this here. The embeddings do not depend
on the batching beyond float rounding (attention masks out the padding).
"""

from __future__ import annotations

from collections.abc import Sequence


def by_length(titles: Sequence[str], texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Row indices in batches of at most ``batch_size``, longest ``title text`` first (a batch that does not fit
    in memory fails at once, not at the end)."""
    if batch_size < 1:
        raise ValueError(f"batch_size {batch_size}: must be at least 1")
    order = sorted(range(len(texts)), key=lambda i: (-(len(titles[i]) + len(texts[i])), i))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
