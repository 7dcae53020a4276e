"""Reading the user's text files (topics, qrels, corpora, runs, listwise sets) with one-line errors.

Every reader of a user file goes through here, so every file gets the same treatment:

- a path that is a directory, or does not exist, is reported as such, naming the config key;
- a UTF-8 byte-order mark at the start of a file is removed (a documented normalisation: Windows
  editors write one, and it would otherwise glue itself to the first query or document id);
- bytes that are not UTF-8 are reported with the file, the line and the column, and the fix;
- invalid JSON is reported with the file and the line.

Python's ``open(..., encoding="utf-8")`` would raise ``UnicodeDecodeError`` with a byte offset and no
file name, and ``encoding="utf-8-sig"`` cannot name the line either; decoding line by line can.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from posbias.errors import PosbiasError

BOM = b"\xef\xbb\xbf"


def require_file(path: str | Path, what: str, key: str) -> Path:
    """``path`` as a Path, or a one-line error naming the config key: missing, or a directory."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise PosbiasError(f"{key}: {what} path {path} is a directory, not a file; point it at the {what} file")
    if not path.is_file():
        raise PosbiasError(f"{key}: {what} file {path} does not exist; fix the path in the config")
    return path


def _decode(raw: bytes, path: Path, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PosbiasError(
            f"{path}:{lineno}: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} is not UTF-8; "
            "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline) for every non-blank line; ``.gz`` files are read gunzipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:  # type: ignore[operator]
        for lineno, raw in enumerate(handle, 1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            line = _decode(raw, path, lineno).rstrip("\r\n")
            if line.strip():
                yield lineno, line


def jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line of a JSON Lines file; each record must be an object."""
    for lineno, line in lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PosbiasError(f"{path}:{lineno}: not valid JSON ({exc.msg}); one JSON object per line") from None
        if not isinstance(record, dict):
            raise PosbiasError(f"{path}:{lineno}: expected a JSON object per line, found {type(record).__name__}")
        yield lineno, record


def read_json(path: Path):
    """The parsed JSON document of ``path``."""
    raw = path.read_bytes()
    if raw.startswith(BOM):
        raw = raw[len(BOM):]
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        _decode(line, path, lineno)  # names the line of a bad byte
    try:
        return json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise PosbiasError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
