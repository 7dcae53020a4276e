"""How far local Kemenisation from Borda (what PermSC uses beyond EXACT_KEMENY_MAX items) is from the
exact Kemeny optimum, where the exact MILP is still feasible, and what each costs.

Rankings are noisy copies of one hidden order (adjacent swaps), as K reranked shuffles of one list are.
One summary line per (n, K): mean and max relative gap of the total Kendall distance, seconds of each.

    python bench/kemeny_gap.py [--trials 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from posbias import debias


def noisy_rankings(rng: random.Random, n: int, k: int, swaps: int) -> list[list[str]]:
    base = [f"d{i}" for i in range(n)]
    rng.shuffle(base)
    out = []
    for _ in range(k):
        r = base[:]
        for _ in range(swaps):
            i = rng.randrange(n - 1)
            r[i], r[i + 1] = r[i + 1], r[i]
        out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(0)
    for n in (20, 30, 40):
        for k in (5, 10, 20):
            gaps, t_exact, t_local = [], [], []
            for _ in range(args.trials):
                rankings = noisy_rankings(rng, n, k, swaps=n)
                start = time.perf_counter()
                exact = debias.kendall_distance_total(debias.kemeny(rankings), rankings)
                t_exact.append(time.perf_counter() - start)
                start = time.perf_counter()
                local = debias.kendall_distance_total(debias.local_search(debias.borda(rankings), rankings), rankings)
                t_local.append(time.perf_counter() - start)
                gaps.append((local - exact) / exact if exact else 0.0)
            print(f"kemeny_gap n={n} K={k} trials={args.trials} mean_gap={statistics.mean(gaps):.4%} "
                  f"max_gap={max(gaps):.4%} exact_s={statistics.mean(t_exact):.3f} local_s={statistics.mean(t_local):.3f}")


if __name__ == "__main__":
    main()
