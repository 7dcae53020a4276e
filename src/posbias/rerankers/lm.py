"""Loading a causal LM reranker (real checkpoint or local folder) and reading identifiers from it.

The same code loads the released FIRST checkpoint, Zephyr-β, a Qwen model or a tiny local build:
``AutoTokenizer`` / ``AutoModelForCausalLM`` with the configured dtype, attention implementation and
``trust_remote_code`` (off unless the user says so). The listwise rerankers run the model through an
engine (``models.<name>.engine``, :mod:`posbias.engines`): transformers' own forward pass, or vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from posbias import config, engines, hub
from posbias.engines.hf import load_model
from posbias.errors import PosbiasError
from posbias.prompts import IDENTIFIERS, identifiers, render
from posbias.rerankers.base import BuildContext, Reranker


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
    engine: str = _MODEL["engine"]  # a key of posbias.engines.ENGINES
    vllm: dict = field(default_factory=lambda: config.defaults("models", "vllm"))  # engine vllm: its settings


def lm_spec(spec: dict, context: BuildContext) -> LMSpec:
    """The :class:`LMSpec` of a validated causal_lm ``models:`` entry, on ``context``'s path, device and
    word budget."""
    return LMSpec(path=context.path, dtype=spec["dtype"], max_context=spec["max_context"],
                  attn_implementation=spec["attn_implementation"], trust_remote_code=spec["trust_remote_code"],
                  word_budget=context.word_budget, batch_size=spec["batch_size"], device=context.device,
                  prompt=spec["prompt"], identifiers=spec["identifiers"],
                  engine=spec.get("engine", _MODEL["engine"]),  # params omit the default
                  vllm={**config.defaults("models", "vllm"), **spec.get("vllm", {})})


def load(spec: LMSpec, with_model: bool = True):
    """(tokenizer, model) ready for batched left-padded inference.

    ``with_model=False`` loads the tokenizer alone and returns ``(tokenizer, None)``: a reranker built
    so counts its model calls and prompt tokens without running the model (the compute plan,
    :mod:`posbias.plan`). Where the tokenizer cannot be loaded either (an HF id not in the local
    cache), the plan uses :class:`posbias.plan.RuleOfThumbTokenizer` instead (``plan.counting_reranker``).
    """
    from transformers import AutoTokenizer

    if spec.path.startswith((".", "/", "~")) and not Path(spec.path).expanduser().is_dir():
        raise PosbiasError(f"model path {spec.path} does not exist; build it (rule build_tiny_model) or fix `path`")
    hub.require(spec.path, "the models entry's path")  # the jobs name the entry first (hub.require in each script)
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
        model = load_model(spec) if with_model else None
    except OSError as exc:
        raise PosbiasError(f"model {spec.path!r} cannot be loaded: {str(exc).splitlines()[0]}") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model


def load_engine(spec: LMSpec, loaded: tuple | None = None) -> tuple:
    """(tokenizer, engine) of a listwise reranker: ``spec.engine``'s engine (:mod:`posbias.engines`) on
    ``spec.path``; ``loaded=(tokenizer, None)`` counts without a model, as :func:`load` does."""
    if loaded is not None:
        return loaded
    tokenizer, _ = load(spec, with_model=False)
    return tokenizer, engines.open_engine(spec, tokenizer)


class ListwiseLM(Reranker):
    """A causal LM read as a listwise reranker (FIRST, generation): its tokenizer and engine, and how its
    answer's identifiers are read (:func:`readout`). ``multi_token``: some identifier spans several tokens,
    so every window reads log-probabilities (:func:`identifier_scores`); the engine starts here, in that
    mode, so a job's start-up is part of its model load."""

    def __init__(self, spec: LMSpec, loaded: tuple | None = None):
        super().__init__()
        self.spec = spec
        self.tokenizer, self.engine = load_engine(spec, loaded)
        self.batches_itself = self.engine is not None and self.engine.schedules_batches
        self.readout = readout(self.tokenizer, spec.prompt, spec.identifiers, len(IDENTIFIERS))
        self.paths = self.readout.paths
        self.multi_token = any(len(p) > 1 for p in self.paths)
        if self.engine is not None:
            self.engine.start(normalise=self.multi_token)

    @classmethod
    def from_config(cls, spec: dict, context: BuildContext) -> ListwiseLM:
        return cls(lm_spec(spec, context), context.loaded)


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


def identifier_scores(engine, encoded: list[list[int]], paths: list[list[tuple[int, ...]]],
                      normalise: bool | None = None) -> tuple[list[list[float]], list[tuple[int, int]]]:
    """One score per identifier path of each prompt, and each prompt's (forward passes, prompt tokens).

    Single-token paths (letter identifiers): the next-token logits after the prompt, one forward pass
    (FIRST's readout). Multi-token paths: the log-probability of the whole path, the sum of its tokens'
    log-softmax; one extra forward pass per distinct proper prefix (for [1] … [20] with a digit-splitting
    tokenizer: the prompt, ``1`` and ``2``). In the single-token case the logits and the log-probabilities
    rank, and softmax-normalise over the identifiers, identically. ``normalise`` (default: whether any
    path here has several tokens) says which of the two: a reranker whose identifiers include multi-token
    ones reads log-probabilities in every window, the short ones too, so one engine answers all its
    windows in one mode. ``engine`` (:mod:`posbias.engines`) is asked only for the tokens the paths read.
    With ``engine=None`` nothing runs: every score is 0 and the costs are those the model would have spent.
    """
    single = all(len(p) == 1 for row in paths for p in row) if normalise is None else not normalise
    prefixes = [sorted({p[:t] for p in row for t in range(1, len(p))}) for row in paths]
    costs = [(1 + len(prefixes[i]), len(encoded[i]) * (1 + len(prefixes[i])) + sum(len(p) for p in prefixes[i]))
             for i in range(len(encoded))]
    if engine is None:  # counting only (the compute plan): equal scores, the same costs
        return [[0.0] * len(row) for row in paths], costs
    jobs = [(i, ()) for i in range(len(encoded))] + [(i, pre) for i, row in enumerate(prefixes) for pre in row]
    wanted = [sorted({p[len(pre)] for p in paths[i] if len(p) > len(pre) and p[:len(pre)] == pre}) for i, pre in jobs]
    values = engine.next_token([encoded[i] + list(pre) for i, pre in jobs], wanted, normalise=not single)
    next_token = {job: dict(zip(tokens, row)) for job, tokens, row in zip(jobs, wanted, values)}
    scores = [[sum(next_token[(i, p[:t])][p[t]] for t in range(len(p))) for p in row]
              for i, row in enumerate(paths)]
    return scores, costs
