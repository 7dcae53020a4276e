"""A job's output folder that survives preemption: finished parts are kept and reused by the rerun.

Snakemake deletes a job's outputs before it (re)runs it, so a long job that writes many parts (a rerank
job's orders) loses them all when SLURM preempts and requeues it. :class:`PartialFolder` writes the parts
to a hidden sibling of the output folder, ``.<name>.partial``, stamped with a digest of everything the
result depends on (the job's params, the size and modification time of each input file, the code
version); the rerun keeps the parts whose stamp matches and redoes the rest, and :meth:`finish` moves the
folder into place in one rename. A stamp that does not match (other settings, a retrained model, new
code) discards the old parts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from posbias import __version__, atomic, provenance

STAMP = "partial.sha256"


def digest(params: dict, inputs: list[str]) -> str:
    """What a job's parts depend on: its params, each input file's size and mtime (every file under an input
    folder), the package version and the content of its source files (uncommitted edits included)."""
    files = []
    for path in map(Path, inputs):
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file():
                stat = f.stat()
                files.append([str(f), stat.st_size, stat.st_mtime_ns])
    key = {"params": params, "files": files, "version": __version__, "code": _code_digest()}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _code_digest() -> str:
    package = Path(provenance.__file__).parent
    code = hashlib.sha256()
    for f in sorted(package.rglob("*.py")):
        code.update(str(f.relative_to(package)).encode() + b"\0" + f.read_bytes())
    return code.hexdigest()


class PartialFolder:
    """Parts of ``final`` written to ``.<final name>.partial``; ``done(marker)`` says whether a part whose
    last-written file is ``marker`` is already there from an interrupted run with the same ``stamp``."""

    def __init__(self, final: str | Path, stamp: str) -> None:
        self.final = Path(final)
        self.folder = self.final.parent / f".{self.final.name}.partial"
        kept = self.folder / STAMP
        if self.folder.is_file() or self.folder.is_symlink():  # not a folder this class wrote: dropped
            self.folder.unlink()
        elif self.folder.exists() and not (kept.is_file() and kept.read_bytes() == stamp.encode()):
            shutil.rmtree(self.folder)  # another job's parts, or a folder whose stamp is damaged or missing
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic.write_text(kept, stamp)
        self.resumed = 0

    def path(self, name: str) -> Path:
        return self.folder / name

    def done(self, marker: str) -> bool:
        """Whether the part ending with file ``marker`` was finished before (write that file last)."""
        found = (self.folder / marker).is_file()
        self.resumed += found
        return found

    def finish(self) -> None:
        """Move the parts into ``final`` (replacing an empty folder there)."""
        (self.folder / STAMP).unlink()
        if self.final.is_dir():
            self.final.rmdir()
        os.replace(self.folder, self.final)
