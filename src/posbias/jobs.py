"""Glue for Snakemake script jobs: send everything a job prints to its log file.

Java (Lucene), tqdm and Python logging all end up in the rule's ``log:`` file, because the
process's stdout and stderr file descriptors are redirected there, not only ``sys.stderr``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from posbias import provenance
from posbias.errors import PosbiasError


def put_on_pythonpath(folder: str) -> None:
    """Put ``folder`` first on the ``PYTHONPATH`` that Snakemake's jobs inherit (local, conda and SLURM jobs
    alike), so that they import the package from the checkout the workflow runs from."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != folder]
    os.environ["PYTHONPATH"] = os.pathsep.join([folder, *parts])


def release_scheduler_timers() -> int:
    """Cancel the re-evaluation timers Snakemake's job scheduler leaves waiting when a run ends; returns
    how many. Its rate limiter (``max-jobs-per-timespan`` in profiles/default, a 100 s span there) starts
    a non-daemon ``threading.Timer`` each scheduling round, and the interpreter joins those at exit: a
    finished run sat idle for up to the whole span before it returned (measured: 100 s after a 2 s run).
    Called from ``onsuccess`` and ``onerror``, when no job is left to schedule."""
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]
    for timer in timers:
        timer.cancel()
    return len(timers)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int) -> None:
    """Hold this process's numeric libraries to ``threads`` (the job's CPUs), so jobs that share the
    cores do not oversubscribe them. Through the environment for libraries not yet imported (torch
    reads OMP_NUM_THREADS when it is imported: a job that only reads tables never pays torch's
    ~2.5 CPU-seconds import), and directly for a torch already imported."""
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def logged(job, name: str) -> Iterator[logging.Logger]:
    """Redirect fds 1 and 2 to the log of ``job`` (the ``snakemake`` object of a script job) for the
    duration, record the job for the provenance of what it writes, hold it to its threads
    (:func:`limit_threads`) and yield a configured logger.

    A job that fails writes its full traceback to the log and one line to the console: the
    :class:`~posbias.errors.PosbiasError` message (which names the file, key or line and the fix), or
    the exception's type and message for anything else; then it exits with status 1, and Snakemake
    removes the job's outputs.
    """
    log_path = Path(job.log[0])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    provenance.set_job(job.rule, dict(job.wildcards.items()), dict(job.params.items()), job.config.get("seed"))
    limit_threads(job.threads)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    failure: BaseException | None = None
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
        except Exception as exc:
            logger.exception("failed after %.1f s", time.perf_counter() - start)
            failure = exc
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    if failure is not None:
        what = str(failure) if isinstance(failure, PosbiasError) else f"{type(failure).__name__}: {failure}"
        print(f"posbias: {name}: {what.splitlines()[0] if what else type(failure).__name__} "
              f"(traceback in {log_path})", file=sys.stderr, flush=True)
        raise SystemExit(1)
