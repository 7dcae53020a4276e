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


def test_derive_seed_is_stable_and_distinct():
    from posbias.permute import derive_seed

    assert derive_seed(42, "q1", 3) == derive_seed(42, "q1", 3)
    assert len({derive_seed(42, f"q{i}") for i in range(1000)}) == 1000
    assert 0 <= derive_seed("x") < 2**63


def test_move_to_position_keeps_relative_order():
    from posbias.permute import move_to_position

    assert move_to_position(list("abcde"), "d", 0) == list("dabce")
    assert move_to_position(list("abcde"), "a", 4) == list("bcdea")
    assert move_to_position(list("abcde"), "c", 2) == list("abcde")
