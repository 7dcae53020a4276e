"""Reranking throughput, measured side by side on one tiny model, the same windows and batch sizes.

    python bench/rerank_throughput.py [--windows 32] [--hidden 256] [--layers 5]

Reports windows/s of (a) a bare ``model(**inputs)`` forward pass over the exact token batches the
First path builds (the hardware limit for this model), (b) the First path end to end (prompt
building, tokenisation, batching, forward, readout), (c) the generation path; the ratios
First / bare (target >= 0.95) and First / generation at batch 1 (target >= 3 on CPU); and where
the First path's time goes.

Its last line is the throughput table's row for this model on this machine (config/throughput.yaml,
read by the compute plan, posbias.plan), in a stable format::

    throughput device=<name> params_b=<b> prefill_tokens_per_s=<t> call_s=<s> decode_s=<s> load_s=<s> simulated_call_s=<s>

from the First path at two passage lengths (seconds = calls · call_s + tokens / tokens_per_s, solved
for the two unknowns), the generation path's seconds per decoding step and window beyond its prompt,
the time ``from_pretrained`` takes, and the simulated reranker's seconds per window. The cpu-2core
rows come from the default run's own models, one thread, after ``./posbias.sh demo``::

    python bench/rerank_throughput.py --row-only --threads 1 --model results/models/tiny-first \\
        --corpus results/data/synthetic/corpus.parquet --words 50
    python bench/rerank_throughput.py --row-only --threads 1 --model results/models/toy-lm --prompt compact \\
        --batch-size 64 --corpus results/data/toy/corpus.parquet --words 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from posbias.models import build_tiny_causal_lm
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker
from posbias.rerankers.lm import LMSpec, batches_by_length, pad_left
from posbias.rerankers.simulated import SimulatedReranker

WORDS = ("retrieval ranking passage query model position bias order shuffle window relevance "
         "document score listwise training evaluation collection judgement metric").split()


def windows(n: int, seed: int = 0, words: int = 60, vocabulary: list[str] | None = None) -> list[Window]:
    """n windows of 20 passages of ``words`` words drawn from ``vocabulary`` (default: a few IR words)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary or WORDS
    return [Window(f"q{i}", " ".join(rng.choice(vocab, 6)), [f"d{i}-{j}" for j in range(20)],
                   [" ".join(rng.choice(vocab, words)) for _ in range(20)]) for i in range(n)]


def throughput_row(first: FirstReranker, path: Path, n: int, repeat: int, device: str,
                   vocabulary: list[str] | None = None, words: int = 90) -> str:
    """The throughput table's row: call and token costs solved from two passage lengths (10 and ``words``
    words), the generation path's decoding steps, the load time, the simulated reranker's calls."""
    points = []
    for length in (10, words):
        wins = windows(n, seed=length, words=length, vocabulary=vocabulary)
        first.reset_stats()
        first.rank(wins)
        calls, tokens = first.stats["forward_passes"], first.stats["prompt_tokens"]
        points.append((calls, tokens, timed(lambda wins=wins: first.rank(wins), repeat)))
    (c1, t1, s1), (c2, t2, s2) = points
    per_token = (s2 - s1 * c2 / c1) / (t2 - t1 * c2 / c1)
    call_s = max((s1 - t1 * per_token) / c1, 0.0)
    gen = GenerationReranker(LMSpec(str(path), batch_size=first.spec.batch_size, prompt=first.spec.prompt))
    short = windows(n, seed=10, words=10, vocabulary=vocabulary)
    steps = sum(r.stats["calls"] for r in gen.rank(short))
    decode_s = max(timed(lambda: gen.rank(short), 1) - t1 * per_token, 0.0) / steps
    load_s = timed(lambda: FirstReranker(LMSpec(str(path), prompt=first.spec.prompt)), repeat)
    params_b = sum(p.numel() for p in first.model.parameters()) / 1e9
    wins = windows(n, seed=1)
    simulated = SimulatedReranker({w.query_id: {w.doc_ids[0]: 2} for w in wins}, prior="linear", strength=0.5)
    simulated_s = timed(lambda: simulated.rank(wins), repeat) / len(wins)
    return (f"throughput device={device} params_b={params_b:.3g} prefill_tokens_per_s={1 / per_token:.0f} "
            f"call_s={call_s:.2g} decode_s={decode_s:.2g} load_s={load_s:.2g} simulated_call_s={simulated_s:.2g}")


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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    wins = windows(args.windows)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or Path(tmp) / "tiny"
        if not args.model:
            build_tiny_causal_lm([" ".join(w.texts) for w in wins], path, vocab_size=2000, hidden=args.hidden,
                                 layers=args.layers, heads=4, max_length=4096, seed=0)
        first = FirstReranker(LMSpec(str(path), prompt=args.prompt))
        n_params = sum(p.numel() for p in first.model.parameters())
        encoded = [first.encode(w) for w in wins]
        print(f"model: {n_params / 1e6:.2f}M parameters; {len(wins)} windows of 20 passages, "
              f"{np.mean([len(e) for e in encoded]):.0f} prompt tokens on average; torch threads {args.threads}")
        if not args.row_only:
            results = {}
            for bs in (1, 8):
                first.spec.batch_size = bs
                order = batches_by_length(encoded, bs)

                # Both baselines pad the identical token batches on each call, as the First path does
                # (reusing pre-built tensors measured up to 10 % slower here, an allocator effect).
                def bare():
                    with torch.inference_mode():
                        for b in order:
                            ids, mask, pos = pad_left(first.tokenizer, [encoded[i] for i in b], "cpu")
                            first.model(input_ids=ids, attention_mask=mask, position_ids=pos)

                def forward_last():
                    with torch.inference_mode():
                        for b in order:
                            ids, mask, pos = pad_left(first.tokenizer, [encoded[i] for i in b], "cpu")
                            first.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)

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
        first.spec.batch_size = args.batch_size
        vocabulary = None
        if args.corpus:
            import polars as pl

            vocabulary = sorted({w for t in pl.read_parquet(args.corpus)["text"] for w in t.split()})
        print(throughput_row(first, path, args.windows, args.repeat, args.device_name, vocabulary, args.words))


if __name__ == "__main__":
    main()
