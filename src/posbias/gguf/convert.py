"""The conversion of a GGUF file into an HF folder (the ``convert_gguf`` job; :mod:`posbias.gguf`)."""

from __future__ import annotations

import importlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from posbias.errors import PosbiasError
from posbias.gguf import RECORD, where, parts, sha256


def materialise(spec: dict, name: str, scratch: Path) -> Path:
    """The GGUF file itself: the named file, or the parts assembled into ``scratch``."""
    if not spec.get("assemble"):
        return parts(spec, name)[0]
    parts(spec, name)  # the one-line errors first
    module = importlib.import_module(spec["package"])
    target = scratch / getattr(module, "MODEL_NAME", f"{name}.gguf")
    try:
        return Path(module.assemble(target))
    except (ValueError, OSError) as exc:  # the package's own sha256 check, a full disk
        raise PosbiasError(f"{where(name)}: {spec['package']}.assemble() failed: {exc}") from None


def describe(path: Path, name: str) -> dict:
    """What the file says of itself (architecture, tokenizer, chat template), checked against what
    transformers can read, each failure one line."""
    import gguf as gguf_lib
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    try:
        reader = gguf_lib.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError) as exc:
        raise PosbiasError(f"{where(name)}: {path} is not a readable GGUF file ({exc}); a truncated download? "
                           "fetch it again") from None

    def field(key: str):
        item = reader.fields.get(key)
        return None if item is None else item.contents()

    architecture = field("general.architecture")
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise PosbiasError(f"{where(name)}: {path.name} is a {architecture!r} model, which transformers cannot "
                           f"read from GGUF (it reads {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})")
    if field("tokenizer.ggml.model") is None or field("tokenizer.ggml.tokens") is None:
        raise PosbiasError(f"{where(name)}: {path.name} holds no tokenizer (tokenizer.ggml.*); use a GGUF "
                           "exported with its tokenizer")
    return {"architecture": architecture, "name": field("general.name"),
            "context_length": field(f"{architecture}.context_length"),
            "chat_template": field("tokenizer.chat_template") is not None,
            "tensors": len(reader.tensors)}


@contextmanager
def one_reader_per_file() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader`` opens each file once and hands the same read-only reader to every
    later caller. Opening a file parses all its metadata (SmolLM2's 49K-token vocabulary: about 6 s here,
    Gemma 3's 262K more), and transformers opens the file anew for the config, the tokenizer and the weights,
    and :func:`describe` once more: four parses of one file per conversion. transformers imports the class from
    ``gguf`` when it loads (``from gguf import GGUFReader`` inside ``load_gguf_checkpoint``), so the module's
    attribute is the one to replace; it is restored when the block ends."""
    import gguf as gguf_lib

    original, readers = gguf_lib.GGUFReader, {}

    def reader(path, mode: str = "r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf_lib.GGUFReader = reader
    try:
        yield
    finally:
        gguf_lib.GGUFReader = original


def convert(spec: dict, name: str, out_dir: Path, dtype: str = "float32") -> dict:
    """Convert the ``gguf:`` block of ``models.<name>`` into an HF folder at ``out_dir`` (written beside it
    and renamed into place, so a killed job leaves none) and return its record."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from posbias import provenance

    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as scratch, one_reader_per_file():
        path = materialise(spec, name, Path(scratch))
        info = describe(path, name)
        digest = sha256(path)
        if spec.get("sha256") and spec["sha256"] != digest:
            raise PosbiasError(f"{where(name)}.sha256: {path.name} has sha256 {digest}, not {spec['sha256']}; "
                               "a different or damaged file")
        folder, file = str(path.parent), path.name
        torch_dtype = getattr(torch, dtype)
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
            loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch_dtype)
        except (ValueError, KeyError, NotImplementedError, RuntimeError) as exc:
            raise PosbiasError(f"{where(name)}: transformers cannot load {path.name}: "
                               f"{str(exc).splitlines()[0]}") from None
        config = AutoConfig.for_model(**{k: v for k, v in loaded.config.to_dict().items()
                                         if k != "quantization_config"})
        model = type(loaded)(config).to(torch_dtype)
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        if missing or unexpected:  # tied weights are reported missing by design; anything else is a real gap
            real = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
            if real or unexpected:
                raise PosbiasError(f"{where(name)}: the converted {config.model_type} model lacks {real[:3]} "
                                   f"and has unexpected {unexpected[:3]}; report this file")
        if model.config.get_text_config().tie_word_embeddings:
            model.tie_weights()
        del loaded
        record = {"model": name, "source": {k: spec[k] for k in sorted(spec) if k != "sha256"}, "file": file,
                  "bytes": path.stat().st_size, "sha256": digest, "dtype": dtype, **info,
                  "parameters": sum(p.numel() for p in model.parameters()), "provenance": provenance.record()}
        tmp = Path(scratch) / "folder"  # beside out_dir, renamed into place once complete
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        shutil.rmtree(out_dir, ignore_errors=True)
        tmp.rename(out_dir)
    return record


