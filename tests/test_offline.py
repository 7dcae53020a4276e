"""Offline is a first-class state: with the network really absent (as on this machine and on a compute
node) and ``HF_HUB_OFFLINE`` unset, whatever reaches the HF hub fails or falls back within seconds, with
one line naming the model, the config key and the command that fetches it; no retry loop runs.

Each test runs a fresh process whose environment lacks ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE``
(``./posbias.sh test`` sets the first for the rest of the suite)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO
from tests.test_bad_input import _config, _set, _write_files

UNCACHED = "no-such-org/no-such-model"  # an HF id no cache here holds


def _online_env() -> dict[str, str]:
    """This process's environment as a user's shell has it: no offline switch."""
    return {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}


def _hub_unreachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError:
        return True
    return False


pytestmark = pytest.mark.skipif(not _hub_unreachable(), reason="the HF hub is reachable from here: not offline")

SETTLE = ("import os, time; start = time.perf_counter(); from posbias import hub; offline = hub.settle(); "
          "print(offline, os.environ.get('HF_HUB_OFFLINE'), round(time.perf_counter() - start, 1))")


def test_a_process_switches_itself_offline_within_seconds_when_the_hub_is_unreachable():
    out = subprocess.run([sys.executable, "-c", SETTLE], capture_output=True, text=True, timeout=60,
                         env=_online_env())
    offline, flag, seconds = out.stdout.split()
    assert (offline, flag) == ("True", "1") and float(seconds) < 10, out.stdout + out.stderr


def test_a_reachable_endpoint_keeps_the_hub_online():
    """The probe itself: an endpoint that answers (a socket listening here) is not offline."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        env = {**_online_env(), "HF_ENDPOINT": f"http://127.0.0.1:{server.getsockname()[1]}"}
        out = subprocess.run([sys.executable, "-c", SETTLE], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.split()[:2] == ["False", "None"], out.stdout + out.stderr


def test_the_dry_plan_of_a_preset_counts_offline_without_retrying_the_hub(tmp_path):
    """``python -m posbias.dry_plan`` as the README shows it, on the capcal preset cut to its first
    experiment: its HF ids are not cached, so their families' stand-in tokenizers count, at once."""
    preset = yaml.safe_load((REPO / "config" / "paper" / "capcal.yaml").read_text())
    preset["reranking"]["experiments"] = preset["reranking"]["experiments"][:1]
    path = tmp_path / "capcal-one.yaml"
    path.write_text(yaml.safe_dump(preset, sort_keys=False))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "posbias.dry_plan", str(path), "--out", str(tmp_path / "plan")],
                         capture_output=True, text=True, timeout=300, env=_online_env(), cwd=REPO)
    seconds = time.perf_counter() - start
    console = out.stdout + out.stderr
    assert out.returncode == 0 and "plan " in out.stdout, console[-3000:]
    assert "Retrying" not in console and seconds < 120, (seconds, console[-3000:])


def test_a_config_the_dry_plan_refuses_is_one_line_and_exit_status_1(tmp_path, capsys):
    """The OC-SFT preset without the training entry its experiments name: the config check's message,
    one line, no traceback."""
    from posbias import dry_plan

    preset = yaml.safe_load((REPO / "config" / "paper" / "ocsft.yaml").read_text())
    preset["training"] = {"ocsft_1k": preset["training"]["ocsft_1k"]}
    path = tmp_path / "ocsft-1k.yaml"
    path.write_text(yaml.safe_dump(preset, sort_keys=False))
    assert dry_plan.main([str(path), "--out", str(tmp_path / "plan")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posbias.dry_plan: config: reranking.experiments[1].model 'ocsft' is not a models entry"), err


@pytest.mark.workflow
def test_a_model_or_encoder_not_in_the_cache_fails_its_job_in_one_line_with_the_fetch_command(workdir):
    """A reranker and a dense encoder whose HF ids are not cached: each job fails in seconds, naming
    the id, its config key and ``hf download``; no hub retry, no traceback."""
    cfg = _config("imported")
    _set(cfg, "models.sim", {"kind": "causal_lm", "path": UNCACHED})
    _set(cfg, "retrievers.dense", {"kind": "dense", "model": UNCACHED})
    _set(cfg, "datasets.mine.retrievers", ["dense"])
    _write_files(workdir / "in", {})
    configfile = workdir / "offline.yaml"
    configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
         str(configfile), "--replace-workflow-config", "--cores", "2", "--keep-going", "reranking", "retrieval"],
        capture_output=True, text=True, timeout=600, cwd=workdir, env=_online_env())
    seconds = time.perf_counter() - start
    console = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in console and "Retrying" not in console, console[-3000:]
    fetch = f"is not in the local HF cache and the hub cannot be reached from this node; fetch it on a login node " \
            f"with `hf download {UNCACHED}`"
    assert f"models.sim.path: model '{UNCACHED}' {fetch}" in console, console[-3000:]
    assert f"retrievers.dense.model: model '{UNCACHED}' {fetch}" in console, console[-3000:]
    assert seconds < 180, seconds


def test_the_config_checker_names_the_line_of_a_yaml_syntax_error(tmp_path):
    """Snakemake reports a ``--configfile`` that is not YAML without its line; ``python -m posbias.config``
    gives it, and says ok for a good config."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets:\n  mine:\n    source: trec\n   topics: x\n")
    out = subprocess.run([sys.executable, "-m", "posbias.config", str(bad), str(REPO / "config" / "config.yaml"),
                          "--no-files"], capture_output=True, text=True, timeout=120, env=_online_env())
    lines = out.stdout.splitlines()
    assert out.returncode == 1 and lines[0].startswith(f"{bad}:4:4: not valid YAML"), out.stdout + out.stderr
    assert lines[1].startswith(f"{REPO / 'config' / 'config.yaml'}: ok (6 datasets"), out.stdout


# Each snippet times the call that fails, not its imports or the JVM's start (34 s under CI's load once):
# what the test guards against is a download retried until a network timeout.
_TIMED = "import time\nstart = time.perf_counter()\n"
_FAILED = "except Exception as exc:\n    print(round(time.perf_counter() - start, 1))\n    print(type(exc).__name__, exc)"
IRDS = ("from posbias.data import irds\n" + _TIMED
        + "try:\n    irds.queries('cranfield', {home!r})\n" + _FAILED)
PREBUILT = ("from posbias.retrieval import lucene\nfrom posbias.retrieval.java import start_jvm\nstart_jvm()\n"
            "from pyserini.search.lucene import LuceneSearcher\n"
            + _TIMED + "try:\n    lucene.open_searcher(LuceneSearcher, 'msmarco-v1-passage')\n" + _FAILED)


RESPONSES = ("from posbias.data import responses\n" + _TIMED
             + "try:\n    responses.load({'id': 'openbmb/UltraFeedback', 'split': 'train[:10]'}, 'datasets.uf')\n"
             + _FAILED)


def test_a_collection_or_prebuilt_index_not_cached_fails_in_seconds_with_the_fetch_command(tmp_path):
    """ir_datasets, pyserini's prebuilt indexes and HF response sets download on first use; offline and
    not cached, each fails within seconds with one line naming the cache and the command that fetches it
    (the response set retried the hub for 44 s before)."""
    env = {**_online_env(), "PYSERINI_CACHE": str(tmp_path / "pyserini"), "HF_HOME": str(tmp_path / "hf")}
    for code, expected in ((IRDS.format(home=str(tmp_path / "irds")), "fetch it on a login node with `snakemake "
                            "--cores 4 data` (the same IR_DATASETS_HOME)"),
                           (PREBUILT, "'msmarco-v1-passage' is not in pyserini's cache"),
                           (RESPONSES, "datasets.uf.id: HF dataset 'openbmb/UltraFeedback' is not in the local HF "
                            "cache and the hub cannot be reached from this node; fetch it on a login node with "
                            "`hf download --repo-type dataset openbmb/UltraFeedback`")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        lines = out.stdout.strip().splitlines()
        line = lines[-1] if lines else out.stderr[-2000:]
        assert line.startswith("PosbiasError") and expected in line, line
        assert float(lines[-2]) < 30, code  # the failing call's seconds
