import pytest

from posbias.windows import sliding_windows


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, []),
        (7, [(0, 7)]),                      # n < window: one window over all
        (10, [(0, 10)]),                    # n = window - step
        (20, [(0, 20)]),
        (25, [(5, 25), (0, 20)]),           # (n - window) not a multiple of step: the head is still ranked
        (30, [(10, 30), (0, 20)]),
        (100, [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60), (30, 50), (20, 40), (10, 30), (0, 20)]),
    ],
)
def test_known_windows(n, expected):
    assert sliding_windows(n, 20, 10) == expected


@pytest.mark.parametrize("n", range(1, 130))
@pytest.mark.parametrize("window, step", [(20, 10), (20, 5), (4, 3), (5, 5), (1, 1)])
def test_properties(n, window, step):
    wins = sliding_windows(n, window, step)
    assert wins[0][1] == n and wins[-1][0] == 0
    covered = set()
    for (s, e), nxt in zip(wins, wins[1:] + [None]):
        assert 0 <= s < e <= n and e - s == min(window, n)
        covered |= set(range(s, e))
        if nxt:
            assert 0 < e - nxt[1] <= step  # windows move towards the head by at most one step
            if nxt != wins[-1]:
                assert nxt[1] == e - step
    assert covered == set(range(n))


def test_bad_arguments():
    with pytest.raises(ValueError):
        sliding_windows(10, 5, 6)
    with pytest.raises(ValueError):
        sliding_windows(10, 0, 1)
