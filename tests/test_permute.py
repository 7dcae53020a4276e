from collections import Counter
from itertools import permutations

from scipy.stats import chisquare

from posbias.permute import fisher_yates


def test_is_a_permutation_and_seeded():
    items = list("abcdefghij")
    a = fisher_yates(items, 3)
    assert sorted(a) == items
    assert a == fisher_yates(items, 3)
    assert a != fisher_yates(items, 4)
    assert items == list("abcdefghij")  # input untouched


def test_uniform_over_all_permutations():
    counts = Counter(tuple(fisher_yates("abcd", seed)) for seed in range(24 * 300))
    assert set(counts) == set(permutations("abcd"))
    assert chisquare(list(counts.values())).pvalue > 0.001


def test_edge_cases():
    assert fisher_yates([], 0) == []
    assert fisher_yates(["x"], 0) == ["x"]
