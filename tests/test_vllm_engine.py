"""The vLLM engine gives what the transformers engine gives (issue: vLLM as the inference engine).

On the same windows, prompts and token ids: the FIRST readout's scores within 1e-4 (fp32) and the same
rankings; CapCal's content-free priors and its single-step scores; BSC's views; greedy generation's
permutations and sequential CapCal's constrained decoding; whole lists through sliding windows, where
vLLM takes a whole round of windows at once. Letter identifiers on a tiny Llama (vLLM reads raw logits);
numeric identifiers, some of several tokens, on the Qwen3 stand-in with Qwen's real tokenizer (vLLM
reads log-probabilities over the whole vocabulary). One vLLM process per model, shared by its rerankers.

It runs vLLM's CPU build from .venv-vllm, which ./posbias.sh creates.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from posbias import config, debias, standins
from posbias.engines import ENGINES
from posbias.errors import PosbiasError
from posbias.models import build_tiny_causal_lm
from posbias.rerank import Candidates, rerank
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker
from posbias.rerankers.lm import LMSpec, load_engine
from tests.conftest import REPO

VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
RERANKING = config.defaults("reranking")


def _text(i: int, n: int = 40) -> str:
    return " ".join(np.random.default_rng(i).choice(WORDS, n))


def _windows(n: int, size: int = 20) -> list[Window]:
    return [Window(f"q{i}", f"query {WORDS[i]}", [f"d{i}-{j}" for j in range(size)],
                   [_text(100 * i + j, 20 + j) for j in range(size)]) for i in range(n)]


def _spec(path: Path, engine: str, **settings) -> LMSpec:
    vllm = {**config.defaults("models", "vllm"), "python": str(VLLM_PYTHON)}
    return LMSpec(str(path), engine=engine, vllm=vllm, **settings)


def _pair(cls, path: Path, shared: tuple, **settings):
    """The same reranker on transformers and on the shared vLLM engine."""
    return cls(_spec(path, "transformers", **settings)), cls(_spec(path, "vllm", **settings), loaded=shared)


def _wrap(base, name: str):
    return debias.wrap(base, name, 0, debias.options(RERANKING, name))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    if not VLLM_PYTHON.is_file():
        pytest.fail(f"{VLLM_PYTHON} is missing: ./posbias.sh test creates it (the vLLM engine's environment)")
    out = tmp_path_factory.mktemp("vllm") / "tiny"  # head size 32: vLLM's CPU attention takes 32 and more
    build_tiny_causal_lm([_text(i, 60) for i in range(200)], out, vocab_size=600, hidden=64, layers=2, heads=2,
                         max_length=4096, seed=0)
    return out


@pytest.fixture(scope="module")
def tiny_vllm(tiny):
    """One vLLM process for the tiny model (letters: raw logits), shared by every reranker on it."""
    tokenizer, engine = load_engine(_spec(tiny, "vllm"))
    yield tokenizer, engine
    engine.close()


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    out = standins.build("qwen3", tmp_path_factory.mktemp("vllm") / "qwen3", with_model=True)
    tokenizer, engine = load_engine(_spec(out, "vllm", identifiers="numbers", max_context=2048))
    yield out, (tokenizer, engine)
    engine.close()


def _same_results(a, b, scores: bool = True) -> None:
    assert [r.order for r in a] == [r.order for r in b]
    if scores:
        for x, y in zip(a, b):
            np.testing.assert_allclose(x.scores, y.scores, atol=1e-4, rtol=0)
    assert [r.stats for r in a] == [r.stats for r in b]  # the same calls and prompt tokens per window


def test_first_readout_capcal_and_bsc_are_those_of_transformers(tiny, tiny_vllm):
    hf, vl = _pair(FirstReranker, tiny, tiny_vllm)
    windows = _windows(6) + _windows(2, size=7)  # a short window reads only its own identifiers
    _same_results(hf.rank(windows), vl.rank(windows))
    assert vl.engine.mode == "raw_logits" and vl.batches_itself and not hf.batches_itself
    for name in ("capcal", "bsc@3"):  # CapCal's content-free priors, BSC's shuffled views
        _same_results(_wrap(hf, name).rank(windows), _wrap(vl, name).rank(windows))
    assert hf.stats == pytest.approx(vl.stats, abs=1e-6)  # CapCal adds up its α over the steps


def test_whole_lists_through_sliding_windows_give_the_same_run(tiny, tiny_vllm):
    """vLLM takes each round of windows at once (batches_itself); transformers takes batch_size at a time."""
    hf, vl = _pair(FirstReranker, tiny, tiny_vllm, batch_size=2)
    lists = [Candidates(f"q{i}", f"query {WORDS[i]}", [f"d{i}-{j}" for j in range(35)],
                        {f"d{i}-{j}": _text(1000 * i + j, 15) for j in range(35)}) for i in range(4)]
    run_hf, log_hf, cost_hf = rerank(hf, lists, 20, 10, batch_size=2)
    run_vl, log_vl, cost_vl = rerank(vl, lists, 20, 10, batch_size=2)
    assert run_hf["doc_id"].to_list() == run_vl["doc_id"].to_list()
    assert log_hf["output_rank"].to_list() == log_vl["output_rank"].to_list()
    np.testing.assert_allclose(log_hf["score"].to_numpy(), log_vl["score"].to_numpy(), atol=1e-4, rtol=0)
    assert cost_hf["calls"].to_list() == cost_vl["calls"].to_list()


def test_greedy_generation_and_sequential_capcal_are_those_of_transformers(tiny, tiny_vllm):
    hf, vl = _pair(GenerationReranker, tiny, tiny_vllm)
    windows = _windows(4, size=12)
    _same_results(hf.rank(windows), vl.rank(windows), scores=False)
    assert hf.stats["generated_tokens"] == vl.stats["generated_tokens"] > 0
    _same_results(_wrap(hf, "capcal").rank(windows), _wrap(vl, "capcal").rank(windows), scores=False)


def test_numeric_identifiers_read_whole_paths_on_the_qwen3_stand_in(qwen3):
    """[1] … [20] with Qwen's tokenizer: [10] … [20] take two tokens, so both engines sum log-softmax along
    each path (vLLM in raw_logprobs mode), in every window; FIRST's scores, sequential CapCal and generation
    agree."""
    path, shared = qwen3
    hf, vl = _pair(FirstReranker, path, shared, identifiers="numbers", max_context=2048)
    assert any(len(p) > 1 for p in hf.paths)
    windows = _windows(3) + _windows(1, size=7)  # [1] … [7] are single tokens: log-probabilities there too
    _same_results(hf.rank(windows), vl.rank(windows))
    assert vl.engine.mode == "raw_logprobs"
    ghf, gvl = _pair(GenerationReranker, path, shared, identifiers="numbers", max_context=2048)
    _same_results(_wrap(ghf, "capcal").rank(windows[:1]), _wrap(gvl, "capcal").rank(windows[:1]), scores=False)
    _same_results(ghf.rank(windows), gvl.rank(windows), scores=False)


def test_an_engine_reads_one_kind_of_path_and_says_so(qwen3):
    _, (_, engine) = qwen3
    with pytest.raises(PosbiasError, match="started for raw_logprobs, asked for raw_logits"):
        engine.next_token([[1, 2, 3]], [[4]], normalise=False)
    environ = Path(f"/proc/{engine._process.pid}/environ").read_bytes().split(b"\0")
    assert b"VLLM_NO_USAGE_STATS=1" in environ  # no usage report from an offline node


def test_a_missing_environment_and_the_grades_scorer_are_one_line_errors(tiny):
    spec = _spec(tiny, "vllm")
    spec.vllm["python"] = "/nonexistent/python"
    with pytest.raises(PosbiasError, match="vllm.python /nonexistent/python does not exist"):
        FirstReranker(spec).rank(_windows(1))
    # an environment without vLLM: the engine process dies at its import; one line with its last words and
    # where it ran (0.17.0 named neither vllm.python nor where to look)
    import sys

    spec.vllm["python"] = sys.executable
    with pytest.raises(PosbiasError, match=r"vLLM engine for .* exited \(code 1\): ModuleNotFoundError: No module named "
                                           r"'vllm' \(it ran in .*, the models entry's vllm.python"):
        FirstReranker(spec).rank(_windows(1))
    cfg = config.load(REPO / "config" / "config.yaml")
    cfg["models"]["tiny-grades"]["engine"] = "vllm"
    with pytest.raises(ValueError, match="models.tiny-grades.engine vllm: mode grades runs on transformers only"):
        config.check_settings(cfg, files=False)
    assert "grades" not in ENGINES["vllm"].modes


_KILLED_JOB = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from tests.test_vllm_engine import _spec, _windows
from posbias.rerankers.first import FirstReranker
reranker = FirstReranker(_spec(sys.argv[1], "vllm"))
reranker.rank(_windows(1))
print(reranker.engine._process.pid, flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # as Snakemake or SLURM ends a job: Python's default handler, no atexit
"""


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def test_a_job_killed_by_sigterm_leaves_no_vllm_engine_running(tiny):
    """A rerank job ended by SIGTERM (its atexit close never runs) takes its vLLM worker and the worker's
    engine processes with it (PR_SET_PDEATHSIG): before, they kept computing, reparented to init."""
    job = subprocess.Popen([sys.executable, "-c", _KILLED_JOB, str(tiny), str(REPO)], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    worker = int(job.stdout.readline())
    engine_processes = _descendants(worker) | {worker}
    assert job.wait(timeout=60) == -signal.SIGTERM
    deadline = time.time() + 60
    while time.time() < deadline and any(Path(f"/proc/{pid}").exists() for pid in engine_processes):
        time.sleep(0.5)
    alive = [pid for pid in engine_processes if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]]
    assert not alive, f"vLLM processes outlived their job: {alive}"
