"""User-facing errors.

Every problem a user can fix (a bad config key, a missing file, a malformed run) is raised as
:class:`PosbiasError` with one line that names the file or key, what is wrong and how to fix it.
Scripts let it propagate; Snakemake then prints that line and removes the job's outputs.
"""


class PosbiasError(Exception):
    """An input problem the user can fix; the message is one self-contained line."""
