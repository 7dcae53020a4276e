"""The CI phase table: where the suite's wall time goes, printed at the end of every run.

``.ci/run`` has a hard limit, so a slow test must be visible the day it lands. Every workflow run the
tests share (a session fixture, ``tests/workflow_runs.py``), the SLURM cluster and the browser record
their wall time with :func:`phase`; the table adds the install (``posbias.sh`` passes its seconds in
``POSBIAS_INSTALL_SECONDS``), the unit tests and the workflow claims, and pytest's own wall time. Under
pytest-xdist the records travel to the controller in each test report's ``user_properties``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

_PENDING: list[tuple[str, float]] = []  # phases finished on this process since the last test report
_PHASES: dict[str, float] = defaultdict(float)
_TESTS: dict[str, float] = defaultdict(float)  # test seconds by kind (unit / workflow), setup to teardown
_MODULES: dict[str, float] = defaultdict(float)  # unit-test seconds by module: where to look when the suite slows
_START = time.time()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as the phase ``name`` (a shared workflow run, the cluster's start, the browser)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        _PENDING.append((name, time.perf_counter() - started))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    while _PENDING:
        report.user_properties.append(("posbias_phase", _PENDING.pop(0)))


def pytest_runtest_logreport(report) -> None:
    """On the controller (or the only process): gather the phases and the tests' durations."""
    phases = [value for key, value in report.user_properties if key == "posbias_phase"]
    for name, seconds in phases:
        _PHASES[name] += seconds
    kind = "workflow" if "workflow" in report.keywords else "unit"
    own = report.duration - sum(seconds for _, seconds in phases)
    _TESTS[kind] += own
    if kind == "unit":
        _MODULES[report.nodeid.split("::")[0]] += own


def table() -> list[tuple[str, float]]:
    """(phase, seconds) rows: the install, the unit tests, each shared run, the workflow claims, the
    pytest and total wall time."""
    install = float(os.environ.get("POSBIAS_INSTALL_SECONDS", "nan"))
    rows = [("install (posbias.sh: venv, locked stack)", install), ("unit tests (summed over workers)", _TESTS["unit"])]
    rows += sorted(_PHASES.items(), key=lambda kv: -kv[1])
    rows.append(("workflow claims and single-run tests (summed)", _TESTS["workflow"]))
    wall = time.time() - _START
    rows += [("pytest wall time", wall), ("install + pytest wall time", install + wall)]
    return rows


def pytest_terminal_summary(terminalreporter) -> None:
    if not _TESTS:
        return
    terminalreporter.section("phases (wall seconds)")
    for name, seconds in table():
        terminalreporter.write_line(f"{seconds:9.1f}  {name}")
    terminalreporter.section("unit tests by module, the 10 slowest (wall seconds, summed over workers)")
    for module, seconds in sorted(_MODULES.items(), key=lambda kv: -kv[1])[:10]:
        terminalreporter.write_line(f"{seconds:9.1f}  {module}")
