"""Glue for Snakemake script jobs: send everything a job prints to its log file.

Java (Lucene), tqdm and Python logging all end up in the rule's ``log:`` file, because the
process's stdout and stderr file descriptors are redirected there, not only ``sys.stderr``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def logged(log_path: str | os.PathLike, name: str) -> Iterator[logging.Logger]:
    """Redirect fds 1 and 2 to ``log_path`` for the duration, and yield a configured logger."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "a", buffering=1) as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True
        )
        logger = logging.getLogger(name)
        start = time.perf_counter()
        try:
            yield logger
            logger.info("done in %.1f s", time.perf_counter() - start)
        except Exception:
            logger.exception("failed after %.1f s", time.perf_counter() - start)
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
