"""The vLLM engine: vLLM's offline ``LLM`` engine in a process of its own, fed token ids.

vLLM pins transformers below the project's version, so it runs in its own environment
(``models.<name>.vllm.python``, relative to the working directory or else to the checkout;
``./posbias.sh`` creates ``.venv-vllm`` there) as a child process,
:mod:`posbias.engines.vllm_worker`, that this class starts at the first request and talks to over pipes,
one JSON line per request. The job tokenises and renders prompts exactly as with transformers; vLLM sees
only token ids, so the two engines read the same tokens.

- The FIRST readout asks for the identifier tokens' values at the answer's first token with
  ``logprob_token_ids`` (exactly those tokens, none lost to a top-k). vLLM's ``logprobs_mode`` is fixed per
  engine: ``raw_logits`` where every identifier is one token (the transformers path reads raw logits
  there too), ``raw_logprobs`` where a path spans several tokens (log-softmax over the whole vocabulary,
  summed along the path, as the transformers path does). One reranker reads one kind of path, so the
  engine starts in the mode of its first request.
- Generation is greedy, with the model's EOS ids as stop tokens; decoding is not restricted, as on
  transformers, so both parse the same text.
- A whole round of windows goes to vLLM in one request (``schedules_batches``): vLLM batches and
  schedules them itself (continuous batching, paged attention).
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from posbias.engines import Engine, eos_ids
from posbias.engines.python import worker_python
from posbias.errors import PosbiasError

WORKER = Path(__file__).with_name("vllm_worker.py")
log = logging.getLogger(__name__)
_MODES = {False: "raw_logits", True: "raw_logprobs"}  # vLLM's logprobs_mode for next_token(normalise=…)


def _die_with_parent() -> None:
    """In the worker, before it starts: SIGTERM when the job that started it dies, however it dies (Snakemake's
    or SLURM's SIGTERM, which ends Python without its atexit close; SIGKILL; the OOM killer), so no engine is
    left computing for nobody; vLLM shuts its engine processes down on SIGTERM. Linux's PR_SET_PDEATHSIG
    (prctl(2)); elsewhere the worker ends when its input closes. The engine starts its worker from the job's
    main thread, whose end is the job's end (the signal follows the thread that forked)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass


class VllmEngine(Engine):
    """``spec.path`` served by vLLM in the environment of ``spec.vllm["python"]``."""

    schedules_batches = True

    def __init__(self, spec, tokenizer):
        self.spec, self.tokenizer = spec, tokenizer
        self.mode: str | None = None  # vLLM's logprobs_mode, set when the process starts
        self._process: subprocess.Popen | None = None
        self._python: Path | None = None  # the environment the worker runs in (``vllm.python``)
        self._log: collections.deque[str] = collections.deque(maxlen=20)  # the worker's last stderr lines

    @classmethod
    def open(cls, spec, tokenizer) -> VllmEngine:
        """Nothing starts yet: the process starts at the first request, in the mode it needs."""
        return cls(spec, tokenizer)

    def start(self, normalise: bool) -> None:
        """Start the process in the mode ``next_token`` will need."""
        self._start(_MODES[normalise])

    def next_token(self, rows: list[list[int]], tokens: list[list[int]], normalise: bool) -> list[list[float]]:
        mode = _MODES[normalise]
        self._start(mode)
        if mode != self.mode:
            raise PosbiasError(f"vLLM engine of {self.spec.path}: started for {self.mode}, asked for {mode}; "
                               "one engine reads one kind of identifier path")
        return self._ask({"op": "scores", "rows": rows, "tokens": tokens})

    def generate(self, rows: list[list[int]], max_tokens: list[int],
                 stop: set[int]) -> tuple[list[list[int]], int]:
        """The passes are the longest continuation's steps (vLLM decodes the round's rows together)."""
        self._start(self.mode or "raw_logits")
        out = self._ask({"op": "generate", "rows": rows, "max_tokens": max_tokens, "stop": sorted(stop)})
        return out, max((len(t) for t in out), default=0)

    def stop_ids(self) -> set[int]:
        from transformers import GenerationConfig

        try:
            generation = GenerationConfig.from_pretrained(self.spec.path)
        except OSError:  # no generation_config.json: the tokenizer's EOS
            generation = None
        return eos_ids(generation, self.tokenizer)

    def _start(self, mode: str) -> None:
        if self._process is not None:
            return
        python = worker_python(self.spec.vllm["python"])
        if not python.is_file():
            raise PosbiasError(f"models entry {self.spec.path}: vllm.python {python} does not exist; run "
                               "./posbias.sh vllm (it creates .venv-vllm) or point vllm.python at an environment "
                               "with vLLM (docs/usage.md, 'The vLLM engine')")
        self._python = python
        # no usage report to stats.vllm.ai: compute nodes are often offline, and a job sends nowhere
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(self.spec.vllm["kv_cache_gib"]), "VLLM_NO_USAGE_STATS": "1"}
        self._process = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_die_with_parent,
                                         start_new_session=True)  # its group: the worker and vLLM's processes
        self._relaying = threading.Thread(target=self._relay, daemon=True)
        self._relaying.start()
        atexit.register(self.close)
        self.mode = mode
        settings = {"path": self.spec.path, "dtype": self.spec.dtype, "max_model_len": self.spec.max_context,
                    "seed": 0, "logprobs_mode": mode,  # greedy: the seed changes no answer
                    "trust_remote_code": self.spec.trust_remote_code,
                    "engine_args": {key: self.spec.vllm[key]
                                    for key in ("gpu_memory_utilization", "enforce_eager", "max_num_seqs")}}
        started = time.perf_counter()
        ready = self._ask(settings)
        log.info("vLLM engine ready for %s: vLLM %s, logprobs_mode %s, %.0f s to start", self.spec.path,
                 ready["ready"], mode, time.perf_counter() - started)

    def _relay(self) -> None:
        """Copy the worker's stderr (vLLM's log) to this job's, keeping its last lines for an error."""
        for line in self._process.stderr:
            self._log.append(line.rstrip())
            sys.stderr.write(line)

    def _ask(self, request: dict):
        """Send one request and read its reply; a one-line error naming the worker's last words if it died."""
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            code = self._process.wait()
            self._relaying.join(timeout=10)  # its last words may still be in the pipe
            last = next((x for x in reversed(self._log) if "Error" in x), self._log[-1] if self._log else "")
            raise PosbiasError(f"vLLM engine for {self.spec.path} exited (code {code}): {last.strip()} (it ran in "
                               f"{self._python}, the models entry's vllm.python; its log is this job's)")
        reply = json.loads(line)
        if isinstance(reply, dict) and "error" in reply:
            raise PosbiasError(f"vLLM engine for {self.spec.path}: {reply['error']}")
        return reply

    def close(self) -> None:
        """End the worker: its input closes, and after a moment SIGTERM, which vLLM handles by shutting its
        engine processes down (its own orderly exit takes several seconds more, for nothing left to save)."""
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            for stop, grace in ((lambda: None, 1), (self._process.terminate, 15), (self._process.kill, None)):
                stop()
                try:
                    self._process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._process = None
