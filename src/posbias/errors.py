"""User-facing errors.

Every problem a user can fix (a bad config key, a missing file, a malformed run) is raised as
:class:`PosbiasError` with one line that names the file or key, what is wrong and how to fix it.
Scripts let it propagate; Snakemake then prints that line and removes the job's outputs.
"""


class PosbiasError(Exception):
    """An input problem the user can fix; the message is one self-contained line."""


DAG_LOG = ".snakemake/posbias-dag.log"  # where one_line writes the traceback it keeps off the console


def one_line(function):
    """For a Snakefile's input and params functions: a :class:`PosbiasError` (or a config check's
    ``ValueError``) raised while Snakemake builds the DAG reaches the console as its one ``posbias:`` line
    and exit status 1, the traceback in :data:`DAG_LOG`, instead of Snakemake's InputFunctionException
    with its frames. ``SystemExit`` is what passes Snakemake's ``except Exception`` around input functions
    (snakemake.rules.Rule.apply_input_function), and nothing has been locked or written at DAG time."""
    import functools
    import sys
    import traceback
    from pathlib import Path

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (PosbiasError, ValueError) as exc:
            log = Path(DAG_LOG)
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("".join(traceback.format_exception(exc)))
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(f"posbias: {line} (traceback in {DAG_LOG})", file=sys.stderr, flush=True)
            raise SystemExit(1) from exc

    return wrapped
