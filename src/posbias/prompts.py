"""The prompts: listwise RankZephyr / FIRST format with letter identifiers [A] … [T], and the
batched pointwise "Grades:" format of OC-SFT with numbered documents [1] … [B].

The wording follows the prompt of RankZephyr (Pradeep et al., 2023, rank_llm's ``RankListwiseOSLLM``
with alphabetical identifiers, ``--use_alpha``), which the released FIRST checkpoint
(Reddy et al., 2024) was fine-tuned on: a system message, an instruction naming the number of
passages and the query, the passages as ``[A] text`` lines, and a closing instruction asking for
``[] > []`` output. With a chat template the system and user turns go through it; without one
(the tiny CPU models) they are joined as plain text.

Passages are cut to a word budget (``reranking.word_budget``); when the prompt does not fit the model's
context the budget shrinks until it does. The number of passages cut is reported.

A second listwise style, ``compact`` (a ``models:`` entry's ``prompt``), is for the tiny models the
default run trains from scratch on CPU: ``query : q passage [A] passage [B] … query : q answer : [``
with no instruction text and each identifier *after* its passage, so a 20-passage window of
3-word passages is ~130 word-level tokens instead of ~800. It is read exactly like the full
prompt (the identifier logits after the final ``[``); it is not meant for pretrained checkpoints.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

from posbias.errors import PosbiasError

SYSTEM = "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query."


@dataclass(frozen=True)
class Skeleton:
    """An answer skeleton: its first line (``header``) and the word before each slot's grade (``label``):
    ``header``, then ``[m] label: 0`` per slot."""

    header: str
    label: str


# The Grades scorer's answer skeletons by name (read by posbias.scoring): the paper's, its only one ("答案骨架固定为
# Grade: 0 一种"), and a second, ours, for the skeleton channel's probe (skeleton@NAME, posbias.debias.wrappers).
# The second's words are in the Grades prompt ("relevance", "grades"), so the toy's word vocabulary holds them.
SKELETONS = {"grades": Skeleton("Grades:", "Grade"), "relevance": Skeleton("relevance grades:", "relevance")}
DEFAULT_SKELETON = "grades"
# The Grades scorer's own system turn (OC-SFT): a 4-level grading task, not the listwise ranking one.
GRADES_SYSTEM = ("You are an intelligent assistant that grades documents by their relevance to a search query "
                 "on a 4-level scale: 0 (irrelevant), 1 (related), 2 (relevant), 3 (perfectly relevant).")
# The frozen reader's turn (multi-document QA, OC-SFT's second consumer): answer from the retained passages.
READER_SYSTEM = ("You are a question answering assistant. Answer the question using the passages; reply with "
                 "a short answer only.")
IDENTIFIERS = tuple(string.ascii_uppercase[:20])  # [A] … [T], as in FIRST
# A model's ``identifiers``: letters [A] … [T] (FIRST, RankZephyr with --use_alpha) or numbers [1] … [20]
# (RankGPT, RankVicuna); the word the instruction uses for them.
IDENTIFIER_STYLES = {"letters": (IDENTIFIERS, "alphabetical"),
                     "numbers": (tuple(str(i) for i in range(1, 21)), "numerical")}


def identifiers(n: int, style: str = "letters") -> list[str]:
    """The first ``n`` identifiers of ``style`` (a key of :data:`IDENTIFIER_STYLES`)."""
    ids = IDENTIFIER_STYLES[style][0]
    if n > len(ids):
        raise ValueError(
            f"a window of {n} passages needs more identifiers than the {len(ids)} {style} {ids[0]}…{ids[-1]}; "
            f"set reranking.window to at most {len(ids)}"
        )
    return list(ids[:n])


def user_message(query: str, passages: list[str], style: str = "letters") -> str:
    """The RankZephyr / FIRST user turn with ``style`` identifiers."""
    ids = identifiers(len(passages), style)
    n = len(passages)
    head = (
        f"I will provide you with {n} passages, each indicated by a {IDENTIFIER_STYLES[style][1]} identifier []. "
        f"Rank the passages based on their relevance to the search query: {query}.\n\n"
    )
    body = "".join(f"[{i}] {text}\n" for i, text in zip(ids, passages))
    tail = (
        f"\nSearch Query: {query}.\n"
        f"Rank the {n} passages above based on their relevance to the search query. All the passages "
        "should be included and listed using identifiers, in descending order of relevance. The output "
        f"format should be [] > [], e.g., [{ids[min(1, n - 1)]}] > [{ids[0]}], Answer concisely and directly "
        "and only respond with the ranking results, do not say any word or explain."
    )
    return head + body + tail


def grades_message(query: str, passages: list[str], markers: Sequence[int] | None = None) -> str:
    """The batched pointwise instruction (OC-SFT): numbered documents, one 0–3 grade each, no ranking.

    ``markers`` number the slots (default ``1 … n`` in slot order; marker renaming passes a permutation)."""
    n = len(passages)
    body = "".join(f"[{i}] {text}\n" for i, text in zip(markers or range(1, n + 1), passages))
    return (
        f"I will provide you with {n} documents, each indicated by a numerical identifier []. "
        f"Grade the relevance of each document to the search query: {query}.\n\n{body}"
        f"\nSearch Query: {query}.\nGive each of the {n} documents one integer relevance grade: 0 (irrelevant), "
        "1 (related), 2 (relevant) or 3 (perfectly relevant). Do not rank the documents and do not explain; "
        "fill in the grades."
    )


def compact_text(query: str, passages: list[str], style: str = "letters") -> str:
    """The ``compact`` listwise prompt (see the module docstring); no chat template, no system turn."""
    ids = identifiers(len(passages), style)
    body = " ".join(f"{text} [{i}]" for i, text in zip(ids, passages))
    return f"query : {query} {body} query : {query} answer : "


PROMPT_STYLES = ("rankzephyr", "compact")


def truncate_words(text: str, budget: int) -> tuple[str, bool]:
    words = text.split()
    if len(words) <= budget:
        return " ".join(words), False
    return " ".join(words[:budget]), True


@dataclass
class Prompt:
    text: str
    truncated: int  # passages cut to the word budget
    budget: int  # the word budget finally used
    input_ids: list[int] | None = None  # the tokenised text (with special tokens), when it was measured


def render(tokenizer, query: str, passages: list[str], word_budget: int, max_tokens: int | None = None,
           answer_prefix: str = "", message=user_message, style: str = "rankzephyr",
           id_style: str = "letters", markers: Sequence[int] | None = None) -> Prompt:
    """The full prompt text up to the assistant's answer (plus ``answer_prefix``), fitted to ``max_tokens``.

    ``message(query, passages)`` writes the user turn: :func:`user_message` (listwise ranking, with
    ``id_style`` identifiers, after the :data:`SYSTEM` turn) or :func:`grades_message` (batched
    pointwise grading with slot ``markers``, after :data:`GRADES_SYSTEM`). ``style="compact"`` writes :func:`compact_text`
    instead (listwise only). Chat templates get ``enable_thinking=False`` (Qwen3's then answers at
    once; the others ignore it).
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style {style!r}: use one of {', '.join(PROMPT_STYLES)}")
    if style == "compact" and message is not user_message:
        raise ValueError("the compact prompt style is listwise only; the Grades scorer uses the full prompt")
    budget = word_budget
    while True:
        cut = [truncate_words(p, budget) for p in passages]
        shown = [c[0] for c in cut]
        user = message(query, shown, id_style) if message is user_message else message(query, shown, markers)
        system = GRADES_SYSTEM if message is grades_message else SYSTEM
        if style == "compact":
            text = compact_text(query, shown, id_style)
        elif getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                tokenize=False, add_generation_prompt=True, enable_thinking=False,
            )  # enable_thinking: Qwen3's template then answers at once (an empty think block); others ignore it
        else:
            text = f"{system}\n\n{user}\n\n"
        text += answer_prefix
        ids = tokenizer(text, add_special_tokens=True)["input_ids"] if max_tokens else None
        if not max_tokens or len(ids) <= max_tokens or budget <= 1:
            if max_tokens and len(ids) > max_tokens:
                raise PosbiasError(f"prompt: even with 1 word per passage the prompt has {len(ids)} tokens, more than "
                                   f"the {max_tokens} the model may read; raise the models entry's max_context (up to "
                                   "its max_position_embeddings) or rerank in smaller windows (reranking.window)")
            return Prompt(text, sum(c[1] for c in cut), budget, ids)
        budget = max(1, int(budget * 0.8))
