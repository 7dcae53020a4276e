import polars as pl
import pytest
from scipy.stats import chisquare

from posbias.augment import (
    augment,
    gold_ranks,
    groups,
    position_rank_table,
    rotate_groups,
)
from posbias.data import synthetic


def test_rotate_groups_known_answer():
    assert rotate_groups(list("abcdef"), 3) == [list("abcdef"), list("cdefab"), list("efabcd")]
    # k not divisible by n: array_split sizes 3, 3, 2, 2
    assert [len(g) for g in groups(list(range(10)), 4)] == [3, 3, 2, 2]
    assert rotate_groups(list(range(10)), 4)[1] == [3, 4, 5, 6, 7, 8, 9, 0, 1, 2]
    with pytest.raises(ValueError):
        rotate_groups([1, 2], 3)


@pytest.mark.parametrize("k, n", [(20, 4), (20, 5), (20, 3), (7, 7), (20, 1)])
def test_variants_are_permutations_and_visit_every_group_slot(k, n):
    items = list(range(k))
    variants = rotate_groups(items, n)
    assert len(variants) == n
    sizes = [len(g) for g in groups(items, n)]
    for item in items:
        slots = set()
        for r, variant in enumerate(variants):
            assert sorted(variant) == items
            pos = variant.index(item)
            rotated_sizes = sizes[r:] + sizes[:r]  # slot boundaries of variant r
            slots.add(next(s for s in range(n) if pos < sum(rotated_sizes[: s + 1])))
        assert len(slots) == n  # n distinct group slots


def test_gold_ranks():
    assert gold_ranks(["b", "c", "a"], ["a", "b", "c"]) == [1, 2, 0]


@pytest.fixture(scope="module")
def listwise():
    return synthetic.generate(synthetic.SyntheticSpec(n_docs=500, n_test_queries=1, n_train_queries=300), "train").listwise


def test_posaug_makes_the_best_passage_position_uniform(listwise):
    def best_positions(instances):
        table = position_rank_table(instances).filter(pl.col("gold_rank") == 0).sort("input_position")
        return table["count"].to_list()

    noaug = best_positions(augment(listwise, "noaug", 4, 0))
    posaug_instances = augment(listwise, "posaug", 4, 0)
    posaug = best_positions(posaug_instances)
    assert posaug_instances.height == 4 * listwise.height
    assert chisquare(noaug).pvalue < 1e-6  # first-stage order puts the best passage early
    assert chisquare(posaug).pvalue > 0.001
    randaug = augment(listwise, "randaug", 4, 0)
    assert randaug.height == listwise.height and chisquare(best_positions(randaug)).pvalue > 0.001


def test_augmentation_keeps_instances_consistent_and_seeded(listwise):
    a, b = augment(listwise, "posaug", 5, 1), augment(listwise, "posaug", 5, 1)
    assert a.equals(b) and not a.equals(augment(listwise, "posaug", 5, 2))
    for row in a.head(20).iter_rows(named=True):
        assert sorted(row["doc_ids"]) == sorted(row["teacher_ranking"])
    first = listwise.row(0, named=True)
    text_of = dict(zip(first["doc_ids"], first["texts"]))
    for row in a.filter(pl.col("query_id").str.starts_with(first["query_id"] + "#")).iter_rows(named=True):
        assert all(text_of[d] == t for d, t in zip(row["doc_ids"], row["texts"]))
