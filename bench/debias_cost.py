"""Cost of inference-time debiasing, measured side by side.

    python bench/debias_cost.py [--windows 16] [--repeat 5]

1. Exact Kemeny consensus (scipy MILP / HiGHS) for 20 items x 10 and x 20 rankings, random and
   near-agreeing inputs: median milliseconds (target <= 50 ms each).
2. On one tiny First model and the same windows: CapCal / one plain pass (target <= 1.15x: the
   content-free prompt is far shorter and cached per (query, window size)), and PermSC@K / one
   plain pass for K = 5 and 10 (about K: the K views are batched but each is a full pass).

The last line sums it up in a stable format (the ratios the compute plan's readers compare with its
call counts: CapCal and PermSC-window@K cost what their calls say)::

    debias_cost kemeny_20x20_ms=<median> capcal_x=<ratio> permsc5_x=<ratio> permsc10_x=<ratio>
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from posbias import config, debias
from posbias.debias import options, wrap
from posbias.models import build_tiny_causal_lm
from posbias.rerank import Candidates, rerank
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.lm import LMSpec

RERANKING = config.defaults("reranking")  # the schema's PermSC and CapCal settings
WORDS = ("retrieval ranking passage query model position bias order shuffle window relevance "
         "document score listwise training evaluation collection judgement metric").split()


def kemeny_times(repeat: int) -> float:
    """Prints the timings; returns the median of random 20 x 20 inputs (ms)."""
    rng = np.random.default_rng(0)
    items = [f"d{i}" for i in range(20)]
    debias.kemeny([items, items[::-1]])  # import and warm-up
    for m in (10, 20):
        for kind in ("random", "near-agreeing"):
            times = []
            for _ in range(repeat):
                base = list(rng.permutation(items))
                rankings = []
                for _ in range(m):
                    if kind == "random":
                        rankings.append(list(rng.permutation(items)))
                    else:
                        r = list(base)
                        for _ in range(3):
                            i = int(rng.integers(0, 19))
                            r[i], r[i + 1] = r[i + 1], r[i]
                        rankings.append(r)
                start = time.perf_counter()
                debias.kemeny(rankings)
                times.append((time.perf_counter() - start) * 1000)
            print(f"kemeny 20 items x {m:2d} rankings, {kind:13s}: median {statistics.median(times):6.1f} ms "
                  f"(max {max(times):6.1f}; target <= 50)")
            if (m, kind) == (20, "random"):
                worst = statistics.median(times)
    return worst


def model_costs(n_windows: int) -> dict[str, float]:
    """Prints the timings; returns each method's time over one plain pass."""
    rng = np.random.default_rng(1)
    lists = []
    for q in range(n_windows):
        docs = [f"q{q}-d{j}" for j in range(20)]
        lists.append(Candidates(f"q{q}", " ".join(rng.choice(WORDS, 6)), docs,
                                {d: " ".join(rng.choice(WORDS, 60)) for d in docs}))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny"
        build_tiny_causal_lm([" ".join(c.texts.values()) for c in lists], path, vocab_size=2000, hidden=256,
                             layers=5, heads=4, max_length=4096, seed=0)

        def timed(method: str) -> float:
            reranker = wrap(FirstReranker(LMSpec(str(path), batch_size=8)), method, 0, options(RERANKING, method))
            rerank(reranker, lists[:2])  # warm-up (and, for CapCal, nothing cached for the timed queries)
            start = time.perf_counter()
            rerank(reranker, lists)
            return time.perf_counter() - start

        plain = timed("none")
        print(f"\nFirst, one plain pass over {n_windows} windows of 20 passages: {plain:.2f} s")
        ratios = {"capcal": timed("capcal") / plain}
        print(f"CapCal / plain      = {ratios['capcal']:.2f}x (target <= 1.15)")
        for k in (5, 10):
            ratios[f"permsc{k}"] = timed(f"permsc-window@{k}") / plain
            print(f"PermSC-window@{k:<2d} / plain  = {ratios[f'permsc{k}']:.2f}x")
        return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kemeny_ms = kemeny_times(args.repeat)
    ratios = model_costs(args.windows)
    print(f"debias_cost kemeny_20x20_ms={kemeny_ms:.1f} " + " ".join(f"{k}_x={v:.2f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
