"""The CI phase table: where the suite's wall time goes, printed at the end of every run.

``.ci/run`` has a hard limit, so a slow test must be visible the day it lands. Every workflow run the
tests share (a session fixture, ``tests/workflow_runs.py``), the SLURM cluster and the browser record
their wall time with :func:`phase`; the table adds the install (``posbias.sh`` passes its seconds in
``POSBIAS_INSTALL_SECONDS``), the unit tests and the workflow claims, and pytest's own wall time. Under
pytest-xdist the records travel to the controller in each test report's ``user_properties``.

Each row also has its CPU seconds (user + system, of the process and of the children it waited for): the
suite runs on two cores, so once they are busy its wall time follows its CPU, and a niced worker's wall
time says little about its cost. Processes no test waits for (SLURM's daemons and the jobs they start)
are not counted.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

Seconds = tuple[float, float]  # (wall, CPU)


def _cpu() -> float:
    """CPU seconds this process and the children it has waited for have used so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_PENDING: list[tuple[str, Seconds]] = []  # phases finished on this process since the last test report
_PHASES: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
_TESTS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # by kind (unit / workflow), setup to teardown
_MODULES: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # unit tests by module: where to look
_START = time.time()
_CPU_MARK = [_cpu()]  # this process's CPU at its last test report


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as the phase ``name`` (a shared workflow run, the cluster's start, the browser)."""
    started, cpu = time.perf_counter(), _cpu()
    try:
        yield
    finally:
        _PENDING.append((name, (time.perf_counter() - started, _cpu() - cpu)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    now = _cpu()
    report.user_properties.append(("posbias_cpu", now - _CPU_MARK[0]))
    _CPU_MARK[0] = now
    while _PENDING:
        report.user_properties.append(("posbias_phase", _PENDING.pop(0)))


def _add(total: list[float], wall: float, cpu: float) -> None:
    total[0] += wall
    total[1] += cpu


def pytest_runtest_logreport(report) -> None:
    """On the controller (or the only process): gather the phases and the tests' durations."""
    phases = [value for key, value in report.user_properties if key == "posbias_phase"]
    cpu = sum(value for key, value in report.user_properties if key == "posbias_cpu")
    for name, (wall, phase_cpu) in phases:
        _add(_PHASES[name], wall, phase_cpu)
    kind = "workflow" if "workflow" in report.keywords else "unit"
    own = (report.duration - sum(s[0] for _, s in phases), cpu - sum(s[1] for _, s in phases))
    _add(_TESTS[kind], *own)
    if kind == "unit":
        _add(_MODULES[report.nodeid.split("::")[0]], *own)


def table() -> list[tuple[str, float, float]]:
    """(phase, wall seconds, CPU seconds) rows: the install, the unit tests, each shared run, the workflow
    claims, the tests' CPU in all, the pytest and total wall time."""
    install = float(os.environ.get("POSBIAS_INSTALL_SECONDS", "nan"))
    nan = float("nan")
    rows = [("install (posbias.sh: venv, locked stack)", install, nan),
            ("unit tests (summed over workers)", *_TESTS["unit"])]
    rows += [(name, *seconds) for name, seconds in sorted(_PHASES.items(), key=lambda kv: -kv[1][1])]
    rows.append(("workflow claims and single-run tests (summed)", *_TESTS["workflow"]))
    cpu = sum(s[1] for s in _TESTS.values()) + sum(s[1] for s in _PHASES.values())
    wall = time.time() - _START
    rows += [("all tests' CPU (summed over workers)", nan, cpu), ("pytest wall time", wall, nan),
             ("install + pytest wall time", install + wall, nan)]
    return rows


def _seconds(value: float) -> str:
    return f"{value:9.1f}" if value == value else " " * 9


def pytest_terminal_summary(terminalreporter) -> None:
    if not _TESTS:
        return
    terminalreporter.section("phases (seconds)")
    terminalreporter.write_line(f"{'wall':>9}{'CPU':>9}  phase (sorted by CPU)")
    for name, wall, cpu in table():
        terminalreporter.write_line(f"{_seconds(wall)}{_seconds(cpu)}  {name}")
    terminalreporter.section("unit tests by module, the 10 costliest (seconds summed over workers)")
    terminalreporter.write_line(f"{'wall':>9}{'CPU':>9}  module (sorted by CPU)")
    for module, (wall, cpu) in sorted(_MODULES.items(), key=lambda kv: -kv[1][1])[:10]:
        terminalreporter.write_line(f"{_seconds(wall)}{_seconds(cpu)}  {module}")
