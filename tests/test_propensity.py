"""Known answer: the propensity pipeline recovers the simulator's own transition probabilities."""

import numpy as np
import polars as pl
import pytest

from posbias import propensity
from posbias.rerank import rerank
from posbias.rerankers.simulated import SimulatedReranker, prior
from posbias.runs import canonical

K, N_Q, N_SHUFFLES = 20, 3000, 10
GRADE_P = np.array([0.7, 0.15, 0.1, 0.05])  # grades 0..3 of a candidate


def _direct_transition(strength, noise, n_windows=400_000, seed=123):
    """P(output rank | input position) from the simulator's formula alone, on a far larger sample."""
    rng = np.random.default_rng(seed)
    grades = rng.choice(4, size=(n_windows, K), p=GRADE_P)
    scores = grades + strength * prior("linear", K) + noise * rng.standard_normal((n_windows, K))
    # ties (none with noise > 0) would keep input order, as the simulator does
    ranks = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1)
    counts = np.zeros((K, K))
    np.add.at(counts, (np.tile(np.arange(K), n_windows), ranks.reshape(-1)), 1)
    return counts / n_windows


@pytest.fixture(scope="module")
def pipeline_inputs():
    rng = np.random.default_rng(7)
    rows, grades = [], {}
    for q in range(N_Q):
        qid = f"q{q:04d}"
        docs = [f"{qid}-d{j}" for j in range(K)]
        grades[qid] = dict(zip(docs, rng.choice(4, size=K, p=GRADE_P).tolist()))
        rows += [(qid, d, float(K - j)) for j, d in enumerate(docs)]
    first = canonical(pl.DataFrame(rows, schema=["query_id", "doc_id", "score"], orient="row"))
    return first, grades


def test_estimated_transitions_match_the_simulator(pipeline_inputs):
    first, grades = pipeline_inputs
    sampled = propensity.samples(first, N_Q, K, N_SHUFFLES, seed=42)
    assert sampled.height == N_Q * N_SHUFFLES * K
    sim = SimulatedReranker(grades, prior="linear", strength=1.0, noise=1.0, seed=5)
    lists = propensity.sample_lists(sampled, {q: "q" for q in grades}, dict.fromkeys(sampled["doc_id"].to_list(), ""))
    run, _, _ = rerank(sim, lists, window=K, step=10, batch_size=256)
    omega = propensity.estimate(propensity.transitions(sampled, run), K)
    assert omega.sum() == pytest.approx(1.0)
    estimated = K * omega
    expected = _direct_transition(1.0, 1.0)
    assert np.abs(estimated - expected).max() < 0.01
    assert estimated[0, 0] > estimated[-1, 0]  # the linear prior favours early positions


def test_samples_are_seeded_permutations(pipeline_inputs):
    first, _ = pipeline_inputs
    a = propensity.samples(first, 50, K, 3, seed=1)
    assert a.equals(propensity.samples(first, 50, K, 3, seed=1))
    assert a["query_id"].n_unique() == 50
    per_list = a.group_by("query_id", "shuffle").agg(pl.col("doc_id").sort())
    assert per_list["doc_id"].list.len().unique().to_list() == [K]


def test_smoothing_and_frame_roundtrip():
    t = pl.DataFrame({"input_position": [0, 0, 1, 1], "output_rank": [0, 0, 1, 0]})
    omega = propensity.estimate(t, 2)
    assert omega.tolist() == [[0.5, 0.0], [0.25, 0.25]]
    smoothed = propensity.estimate(t, 2, smoothing=1.0)
    assert smoothed.sum() == pytest.approx(1.0) and smoothed[0, 1] == pytest.approx(1 / 8)
    assert np.array_equal(propensity.from_frame(propensity.to_frame(omega)), omega)
