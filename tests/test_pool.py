"""The pool-replacement design (posbias.pool): Pool-PSI and the variance decomposition with known
answers from simulated scorers, and their figures."""

import math

import numpy as np
import polars as pl
import pytest

from posbias import pool
from posbias.paper.pool_figures import pool_psi_figure, variance_figure, pool_summary
from posbias.rerank import Candidates
from posbias.rerankers import Reranker, WindowResult, by_score
from posbias.rerankers.simulated import SimulatedGrader

KEYS = {"model": "m", "dataset": "d", "retriever": "r"}


def _lists(n_queries=3, n_docs=12):
    return [Candidates(f"q{j}", "query", [f"d{i}" for i in range(n_docs)], {f"d{i}": f"t{i}" for i in range(n_docs)})
            for j in range(n_queries)]


GRADES = {f"q{j}": {f"d{i}": (2 if i < 2 else 0) for i in range(12)} for j in range(3)}


def test_the_design_keeps_the_head_and_varies_companions_and_arrangements():
    cells, skipped = pool.design(_lists(), window=6, kept=3, pools=4, orders=3, seed=0)
    assert len(cells) == 3 * 4 * 3 and not skipped
    q0 = [c for c in cells if c.query_id == "q0"]
    assert all(c.doc_ids[:3] == ("d0", "d1", "d2") for c in q0 if c.order == 0)  # kept first, first-stage order
    assert len({c.doc_ids[3:] for c in q0 if c.order == 0}) > 1  # companions differ between pools
    for o in (1, 2):  # arrangement o puts each kept document in the same slot whatever the pool
        slots = {tuple(c.doc_ids.index(d) for d in ("d0", "d1", "d2")) for c in q0 if c.order == o}
        assert len(slots) == 1
    assert pool.design(_lists(n_docs=5), window=6, kept=3, pools=2, orders=1, seed=0)[1] == ["q0", "q1", "q2"]


def _summary(reranker):
    cells, _ = pool.design(_lists(), 6, 3, 4, 3, 0)
    scores, cost = pool.score(reranker, _lists(), cells, 8)
    assert cost["windows"].to_list() == [4 * 3] * 3  # pools × arrangements windows per query, one call each
    assert cost["calls"].to_list() == [4 * 3] * 3
    return pool.summarise(scores, 3, KEYS)


def test_known_answers_from_simulated_graders():
    free = _summary(SimulatedGrader(GRADES, window=6, seed=0))
    assert free["pool_psi"].to_list() == [0.0] * 3 and free["companions"].to_list() == [0.0] * 3
    assert free["order"].to_list() == [0.0] * 3 and (free["document"] > 0).all()
    slot = _summary(SimulatedGrader(GRADES, window=6, prior="linear", strength=3.0, seed=0))
    # a slot prior moves scores with the arrangement only: no companion coupling, kept rankings fixed
    assert slot["pool_psi"].to_list() == [0.0] * 3 and slot["companions"].abs().max() < 1e-15
    assert (slot["order"] > 0).all()
    assert np.allclose(slot["document"] + slot["companions"] + slot["order"], slot["total"])


class Coupled(Reranker):
    """Scores a document by its own number plus a companion-dependent term that differs per document:
    an order-free scorer whose kept documents' ranking moves with the companions."""

    pointwise, window, priors = True, 6, None

    def rank(self, windows):
        out = []
        for w in windows:
            others = sum(int(d[1:]) for d in w.doc_ids)
            scores = [0.1 * int(d[1:]) + np.sin(others * (1 + int(d[1:]))) for d in w.doc_ids]
            out.append(WindowResult(order=by_score(scores), scores=scores, stats={"calls": 1}))
        return out


def test_companion_coupling_shows_in_pool_psi_and_its_variance_part():
    coupled = _summary(Coupled())
    assert (coupled["pool_psi"] > 0).all() and (coupled["companions"] > 0).all()
    assert coupled["order"].abs().max() < 1e-12  # the arrangement changes nothing for it


def test_summary_and_figures(tmp_path):
    tables = [_summary(SimulatedGrader(GRADES, window=6, seed=0)).with_columns(model=pl.lit("a-s1")),
              _summary(SimulatedGrader(GRADES, window=6, prior="linear", strength=3.0, seed=0)).with_columns(
                  model=pl.lit("b"))]
    summary = pool_summary(pl.concat(tables), {"a-s1": "a"}, reference="b")
    rows = {r["variant"]: r for r in summary.iter_rows(named=True)}
    assert rows["a"]["document_share"] == pytest.approx(1.0) and rows["b"]["slot_effect"] == pytest.approx(1.0)
    assert rows["a"]["residual_vs_reference"] == 0.0 and rows["b"]["residual_vs_reference"] == 1.0
    with pytest.raises(ValueError, match="ocsft.pool.reference: 'c' is not a model"):
        pool_summary(pl.concat(tables), {}, reference="c")
    pool_psi_figure(summary, tmp_path / "psi.png")
    variance_figure(summary, tmp_path / "var.png")
    assert all((tmp_path / f).stat().st_size > 1000 for f in ("psi.png", "psi.pdf", "var.png", "var.pdf"))


def test_the_shares_are_of_the_within_document_variance():
    """OC-SFT's 82.5 % / 16.9 % split the variance left within documents (companions + order, not the
    document part), from the parts' means over queries; its 3.2 % is a residual over the reference's."""
    def queries(model, document, companions, order):
        return pl.DataFrame({"model": model, "dataset": "d", "retriever": "r", "query_id": ["q1", "q2"],
                             "pool_psi": 0.1, "document": document, "companions": companions, "order": order,
                             "total": [d + c + o for d, c, o in zip(document, companions, order)]})

    per_query = pl.concat([queries("base", [10.0, 10.0], [6.0, 2.0], [1.0, 1.0]),
                           queries("trained", [10.0, 10.0], [1.0, 1.0], [0.02, 0.06])])
    rows = {r["variant"]: r for r in pool_summary(per_query, {}, reference="base").iter_rows(named=True)}
    base, trained = rows["base"], rows["trained"]
    assert base["companion_coupling"] == pytest.approx(4 / 5) and base["slot_effect"] == pytest.approx(1 / 5)
    assert base["document_share"] == pytest.approx(10 / 15)  # not the paper's denominator
    assert trained["residual_vs_reference"] == pytest.approx(0.04) and base["residual_vs_reference"] == 1.0
    assert math.isnan(pool_summary(per_query, {}).row(0, named=True)["residual_vs_reference"])
