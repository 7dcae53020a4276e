"""Writing an artifact so that a job killed while writing it (preempted, out of memory, out of disk)
leaves the previous artifact or none, never a truncated one.

Every file artifact (Parquet, TREC run, table, figure) is written to a hidden temporary sibling and
renamed over its path when complete: a rename within one folder is atomic on POSIX file systems.
Model folders and indexes are built in a temporary folder and renamed likewise
(:mod:`posbias.models`, :mod:`posbias.retrieval`). A full disk is one line naming the file.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from posbias.errors import PosbiasError


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write (same folder, so the rename is atomic; same suffix, so
    writers that read the format from it work) that replaces ``path`` when the block completes and
    is removed when it raises. A full disk is a PosbiasError naming ``path`` and the space left."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        free = shutil.disk_usage(path.parent).free
        raise PosbiasError(f"{path}: the disk is full ({free / 2**20:.1f} MiB left on its file system), nothing was "
                           "written; free space or put results/ on a larger disk, then rerun") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """``Path(path).write_text(text)``, atomically (:func:`replacing`): a stats file that marks a finished
    part (``posbias.partial``) is never half there."""
    with replacing(path) as tmp:
        tmp.write_text(text)
