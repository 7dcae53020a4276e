"""The vLLM side of :class:`posbias.engines.vllm_engine.VllmEngine`: a process that loads one model in vLLM's
offline ``LLM`` engine and answers requests over its standard input and output, one JSON object a line.

It imports nothing of posbias: it runs in whatever environment has vLLM (``engines.vllm.python``:
``.venv-vllm`` here, whose transformers is inside vLLM's range while the project's is not; the CUDA
``vllm`` wheel's environment on a cluster). Prompts arrive as token ids (the job tokenises them with the
same tokenizer as the transformers path) and answers leave as token ids and numbers, so both engines
read exactly the same tokens.

Requests (after the first line, the engine settings):

- ``{"op": "scores", "rows": [[ids…]…], "tokens": [[ids…]…]}``: for each row, the next-token value of
  each listed token (``logprob_token_ids``: exactly these tokens, none lost to a top-k), a raw logit or
  a log-probability as the engine's ``logprobs_mode`` says.
- ``{"op": "generate", "rows": …, "max_tokens": [n…], "stop": [ids…]}``: greedy continuations, token ids
  up to and including the first stop token.
- ``{"op": "close"}``.
"""

import json
import os
import signal
import sys


def _end_group(signum, frame) -> None:
    """SIGTERM (the job's close, or its death through PR_SET_PDEATHSIG): pass it to the engine processes vLLM
    started in this worker's process group (the job starts the worker in a session of its own), which shut
    down on it, then exit; otherwise they outlive the worker, reparented to init."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGTERM)
    os._exit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _end_group)
    # run as a file, its folder comes first on sys.path: drop it, so that no module beside it shadows a library
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    # The protocol keeps the real stdout; whatever vLLM and its libraries print goes to stderr (the job log).
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    settings = json.loads(sys.stdin.readline())
    import vllm
    from transformers import AutoConfig
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    # the job's context budget plus room for a multi-token identifier's prefix, within the model's positions
    limit = getattr(AutoConfig.from_pretrained(settings["path"], trust_remote_code=settings["trust_remote_code"]),
                    "max_position_embeddings", None)
    max_model_len = settings["max_model_len"] + 8 if limit is None else min(settings["max_model_len"] + 8, limit)
    try:
        llm = LLM(model=settings["path"], skip_tokenizer_init=True, dtype=settings["dtype"],
                  max_model_len=max_model_len, seed=settings["seed"], logprobs_mode=settings["logprobs_mode"],
                  trust_remote_code=settings["trust_remote_code"], **settings["engine_args"])
    except Exception as exc:  # the engine's own reason, on one line, for the job's error
        channel.write(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}) + "\n")
        return
    channel.write(json.dumps({"ready": vllm.__version__}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "close":
            return
        try:
            reply = answer(llm, SamplingParams, TokensPrompt, request)
        except Exception as exc:  # a request vLLM refuses (e.g. a prompt past max_model_len): its reason
            reply = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        channel.write(json.dumps(reply) + "\n")


def answer(llm, SamplingParams, TokensPrompt, request: dict):  # noqa: N803 (vLLM's classes, imported in main)
    """The reply to one ``scores`` or ``generate`` request."""
    prompts = [TokensPrompt(prompt_token_ids=row) for row in request["rows"]]
    if request["op"] == "scores":
        params = [SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(tokens), detokenize=False)
                  for tokens in request["tokens"]]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return [[out.outputs[0].logprobs[0][t].logprob for t in tokens]
                for out, tokens in zip(outputs, request["tokens"])]
    if request["op"] == "generate":
        params = [SamplingParams(max_tokens=n, temperature=0.0, stop_token_ids=request["stop"], detokenize=False)
                  for n in request["max_tokens"]]
        return [list(out.outputs[0].token_ids) for out in llm.generate(prompts, params, use_tqdm=False)]
    return {"error": f"unknown op {request['op']!r}"}

if __name__ == "__main__":
    main()
