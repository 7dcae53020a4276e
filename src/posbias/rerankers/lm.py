"""Loading a causal LM reranker (real checkpoint or local folder) and batching its prompts.

The same code loads the released FIRST checkpoint, Zephyr-β, a Qwen model or a tiny local build:
``AutoTokenizer`` / ``AutoModelForCausalLM`` with the configured dtype, attention implementation and
``trust_remote_code`` (off unless the user says so). Prompts are left-padded and bucketed by length
so a batch wastes little padding; position ids are derived from the attention mask so that a
left-padded row gets exactly the positions it would get alone (batch-size invariance).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from posbias import config, hub
from posbias.errors import PosbiasError
from posbias.prompts import IDENTIFIERS, identifiers, render

DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16"}


_MODEL = config.model_defaults("causal_lm")


@dataclass
class LMSpec:
    """What the ``models:`` entry of a causal LM says (see config/README.md); the defaults are the
    schema's (a causal_lm entry's, ``reranking.word_budget`` and ``device``)."""

    path: str
    dtype: str = _MODEL["dtype"]
    max_context: int = _MODEL["max_context"]
    attn_implementation: str = _MODEL["attn_implementation"]
    trust_remote_code: bool = _MODEL["trust_remote_code"]
    word_budget: int = config.defaults("reranking")["word_budget"]
    batch_size: int = _MODEL["batch_size"]
    device: str = config.schema()["properties"]["device"]["default"]
    prompt: str = _MODEL["prompt"]  # listwise prompt style (posbias.prompts.PROMPT_STYLES)
    identifiers: str = _MODEL["identifiers"]  # letters or numbers (posbias.prompts.IDENTIFIER_STYLES)


def load(spec: LMSpec, with_model: bool = True):
    """(tokenizer, model) ready for batched left-padded inference.

    ``with_model=False`` loads the tokenizer alone and returns ``(tokenizer, None)``: a reranker built
    so counts its model calls and prompt tokens without running the model (the compute plan,
    :mod:`posbias.plan`). Where the tokenizer cannot be loaded either (an HF id not in the local
    cache), the plan uses :class:`posbias.plan.RuleOfThumbTokenizer` instead (``plan.counting_reranker``).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if spec.path.startswith((".", "/", "~")) and not Path(spec.path).expanduser().is_dir():
        raise PosbiasError(f"model path {spec.path} does not exist; build it (rule build_tiny_model) or fix `path`")
    hub.require(spec.path, "the models entry's path")  # the jobs name the entry first (hub.require in each script)
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            spec.path, dtype=getattr(torch, DTYPES[spec.dtype]), attn_implementation=spec.attn_implementation,
            trust_remote_code=spec.trust_remote_code,
        ) if with_model else None
    except OSError as exc:
        raise PosbiasError(f"model {spec.path!r} cannot be loaded: {str(exc).splitlines()[0]}") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model is not None:
        model.eval().to(spec.device)
    return tokenizer, model


# The answer's opening bracket, in order of preference: "[" as FIRST's prompt ends, or " [" where the
# tokenizer merges "[" with a following letter at the prompt's end (Qwen's pre-tokenizer after a newline:
# "[A" is one token, "[O" two) but not after a space, as inside the answer ("… > [B"): the identifier after
# it is then the same single token the model emits for it everywhere in its answer.
ANSWER_PREFIXES = ("[", " [")


@dataclass(frozen=True)
class Readout:
    """How a listwise answer's identifiers are read: ``prefix``, the answer's opening bracket appended to
    the prompt, and per identifier the tokens that spell it after it (:func:`identifier_paths`)."""

    prefix: str
    paths: tuple[tuple[int, ...], ...]

    def single_tokens(self, tokenizer) -> list[int]:
        """One token id per identifier (FIRST's single-pass readout and its rank loss), or a one-line error."""
        for ident, path in zip(identifiers(len(self.paths), "letters"), self.paths):
            if len(path) != 1:
                raise PosbiasError(
                    f"tokenizer: identifier {ident!r} after {self.prefix!r} is not a single token "
                    f"({tokenizer.convert_ids_to_tokens(list(path))}); First's single-pass readout and rank loss "
                    "need one token per identifier: read this model with mode: generation")
        return [path[0] for path in self.paths]


def answer_context(tokenizer, prompt_style: str = "rankzephyr") -> str:
    """The text of a real listwise prompt of this tokenizer and style up to its answer (a one-passage
    window: how the answer tokenises depends only on the prompt's end, the chat template's turn opening)."""
    return render(tokenizer, "query", ["passage"], 8, style=prompt_style).text


def readout(tokenizer, prompt_style: str = "rankzephyr", id_style: str = "letters",
            n: int = len(IDENTIFIERS)) -> Readout:
    """The first answer prefix of :data:`ANSWER_PREFIXES` after which every identifier can be read in the
    real prompt's context (:func:`answer_context`), with its paths; a one-line error when there is none."""
    context = answer_context(tokenizer, prompt_style)
    reasons = []
    for prefix in ANSWER_PREFIXES:
        try:
            return Readout(prefix, tuple(identifier_paths(tokenizer, context + prefix, id_style, n)))
        except PosbiasError as exc:
            reasons.append(str(exc))
    raise PosbiasError(f"{reasons[0]}; after {ANSWER_PREFIXES[1]!r} too: {reasons[1].removeprefix('tokenizer: ')}")


def identifier_token_ids(tokenizer, prompt_style: str = "rankzephyr", n: int = len(IDENTIFIERS)) -> list[int]:
    """The token id of each letter identifier where the answer starts (the logits the rank loss and
    FIRST's readout read): :func:`readout`'s single-token paths."""
    return readout(tokenizer, prompt_style, "letters", n).single_tokens(tokenizer)


def identifier_paths(tokenizer, context: str, style: str, n: int) -> list[tuple[int, ...]]:
    """The tokens that spell each of the first ``n`` identifiers after ``context``, prefix-free.

    ``context`` is a real prompt's text ending with the answer's opening bracket (:func:`readout`), so a
    path is what the tokenizer produces there: an identifier the tokenizer merges with the bracket is an
    error. An identifier whose tokens are a proper prefix of another's (``1`` and ``10`` with a
    digit-splitting tokenizer) also takes the closing ``]`` token, so that no path is a prefix of another
    and each identifier's probability is the product along its own path. Numbers past 9 give several
    tokens with Qwen's and Llama's tokenizers.
    """
    base = tokenizer(context, add_special_tokens=True)["input_ids"]

    def suffix(text: str) -> tuple[int, ...]:
        full = tokenizer(context + text, add_special_tokens=True)["input_ids"]
        if full[: len(base)] != base or len(full) == len(base):
            raise PosbiasError(f"tokenizer: identifier {text!r} after {context[-1]!r} merges with the bracket "
                               f"({tokenizer.convert_ids_to_tokens(full[len(base) - 1:])}); it cannot be read")
        return tuple(full[len(base):])

    ids = identifiers(n, style)
    paths = [suffix(i) for i in ids]
    for k, (ident, path) in enumerate(zip(ids, paths)):
        if any(other != path and other[: len(path)] == path for other in paths):
            closed = suffix(ident + "]")
            if closed[: len(path)] != path:
                raise PosbiasError(f"tokenizer: identifier {ident!r} and its ']' merge into one token; "
                                   "it cannot be told apart from the longer identifiers it prefixes")
            paths[k] = closed
    if len(set(paths)) != len(paths):
        raise PosbiasError(f"tokenizer: two {style} identifiers map to the same tokens")
    return paths


def identifier_scores(model, tokenizer, encoded: list[list[int]], paths: list[list[tuple[int, ...]]],
                      batch_size: int, device: str) -> tuple[list[list[float]], list[tuple[int, int]]]:
    """One score per identifier path of each prompt, and each prompt's (forward passes, prompt tokens).

    Single-token paths (letter identifiers): the next-token logits after the prompt, one forward pass
    (FIRST's readout). Multi-token paths: the log-probability of the whole path, the sum of its tokens'
    log-softmax; one extra forward pass per distinct proper prefix (for [1] … [20] with a digit-splitting
    tokenizer: the prompt, ``1`` and ``2``). In the single-token case the logits and the log-probabilities
    rank, and softmax-normalise over the identifiers, identically. With ``model=None`` nothing runs:
    every score is 0 and the costs are those the model would have spent.
    """
    import torch

    single = all(len(p) == 1 for row in paths for p in row)
    prefixes = [sorted({p[:t] for p in row for t in range(1, len(p))}) for row in paths]
    costs = [(1 + len(prefixes[i]), len(encoded[i]) * (1 + len(prefixes[i])) + sum(len(p) for p in prefixes[i]))
             for i in range(len(encoded))]
    if model is None:  # counting only (the compute plan): equal scores, the same costs
        return [[0.0] * len(row) for row in paths], costs
    jobs = [(i, ()) for i in range(len(encoded))] + [(i, pre) for i, row in enumerate(prefixes) for pre in row]
    rows = [encoded[i] + list(pre) for i, pre in jobs]
    next_token: dict[tuple[int, tuple[int, ...]], torch.Tensor] = {}
    with torch.inference_mode():
        for batch in batches_by_length(rows, batch_size):
            ids, mask, positions = pad_left(tokenizer, [rows[j] for j in batch], device)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                           logits_to_keep=1).logits[:, -1, :].float()
            out = logits if single else torch.log_softmax(logits, dim=-1)
            for r, j in enumerate(batch):
                next_token[jobs[j]] = out[r].cpu()
    scores = [[sum(float(next_token[(i, p[:t])][p[t]]) for t in range(len(p))) for p in row]
              for i, row in enumerate(paths)]
    return scores, costs


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
