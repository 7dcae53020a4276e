import json
import logging
import subprocess
import sys

import polars as pl
import pytest

from posbias import data
from posbias.data import imported, listwise, local, synthetic
from posbias.errors import PosbiasError


def _beir(root, with_qrels=True, corpus_lines=None):
    root.mkdir()
    lines = corpus_lines or [{"_id": "d1", "title": "T1", "text": "alpha"}, {"_id": "d2", "title": "", "text": "beta"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "alpha?"}) + "\n")
    if with_qrels:
        (root / "qrels").mkdir()
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td2\t1\n")
    return root


def test_beir_folder_loads_and_drops_unknown_query_qrels(tmp_path, caplog):
    root = _beir(tmp_path / "b")
    with caplog.at_level(logging.WARNING):
        coll = data.load("b", {"source": "beir", "path": str(root), "split": "test"}, seed=0)
    assert coll.corpus["doc_id"].to_list() == ["d1", "d2"]
    assert coll.qrels.to_dicts() == [{"query_id": "q1", "doc_id": "d1", "relevance": 1}]
    assert "qrels name 1 queries (1 judgements) that are not among the queries" in caplog.text


def test_beir_without_qrels_is_an_error(tmp_path):
    root = _beir(tmp_path / "b", with_qrels=False)
    with pytest.raises(PosbiasError, match=r"has no qrels/test.tsv .*no qrels folder"):
        data.load("b", {"source": "beir", "path": str(root)}, seed=0)


def test_duplicate_doc_ids_rejected(tmp_path):
    root = _beir(tmp_path / "b", corpus_lines=[{"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"}])
    with pytest.raises(PosbiasError, match=r"corpus.jsonl:2: doc id 'd1' occurs again \(first at line 1\)"):
        data.load("b", {"source": "beir", "path": str(root)}, seed=0)


def test_empty_corpus_rejected(tmp_path):
    (tmp_path / "c.tsv").write_text("")
    (tmp_path / "t.tsv").write_text("q1\thello\n")
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    with pytest.raises(PosbiasError, match="c.tsv: the corpus file has no documents"):
        data.load("t", {"source": "trec", "topics": str(tmp_path / "t.tsv"), "qrels": str(tmp_path / "q.txt"),
                        "corpus": str(tmp_path / "c.tsv")}, seed=0)


def test_trec_files_and_missing_file(tmp_path):
    (tmp_path / "c.tsv").write_text("d1\tTitle\tsome text\nd2\tother text\n")
    (tmp_path / "t.tsv").write_text("q1\thello\n")
    (tmp_path / "q.txt").write_text("q1 0 d1 2\n")
    coll = local.load_trec(tmp_path / "t.tsv", tmp_path / "q.txt", tmp_path / "c.tsv")
    assert coll.corpus.to_dicts()[0] == {"doc_id": "d1", "title": "Title", "text": "some text"}
    assert coll.qrels["relevance"].to_list() == [2]
    with pytest.raises(PosbiasError, match=r"datasets.x.qrels: qrels file .*nope.txt does not exist"):
        local.load_trec(tmp_path / "t.tsv", tmp_path / "nope.txt", tmp_path / "c.tsv", key="datasets.x")


def test_rank_llm_candidates_dl19(shared_data):
    path = shared_data / "trec-dl-2019/rank_llm/retrieve_results/BM25/retrieve_results_dl19.json"
    queries, passages, run, no_hits = imported.read_rank_llm(path)
    assert len(queries) == 43 and run.height == 4300 and no_hits == []
    assert run.group_by("query_id").len()["len"].unique().to_list() == [100]
    first = run.filter(pl.col("query_id") == "264014").head(1).to_dicts()[0]
    assert first["doc_id"] == "5611210" and first["rank"] == 1


def test_imported_dataset_with_trec_run_needs_corpus(tmp_path):
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 x\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    spec = {"source": "imported", "qrels": str(tmp_path / "qrels.txt"),
            "runs": {"bm25": {"path": str(tmp_path / "run.trec"), "format": "trec"}}}
    with pytest.raises(PosbiasError, match="needs the dataset's `corpus` file"):
        imported.load(spec, "datasets.x")
    (tmp_path / "corpus.tsv").write_text("d1\tpassage one\n")
    (tmp_path / "topics.tsv").write_text("q1\tquery one\n")
    coll = imported.load({**spec, "corpus": str(tmp_path / "corpus.tsv"), "topics": str(tmp_path / "topics.tsv")},
                         "datasets.x")
    assert list(coll.runs) == ["imported:bm25"]


def test_tevatron_listwise_oracle_teacher(shared_data):
    coll = listwise.load({"path": str(shared_data / "msmarco-train-sample/msmarco.json"), "format": "tevatron",
                          "n_candidates": 20}, "datasets.m", seed=1)
    assert coll.listwise.height == 100
    positives = coll.qrels.filter(pl.col("relevance") == 1).group_by("query_id").agg(pl.col("doc_id"))
    pos = {r["query_id"]: set(r["doc_id"]) for r in positives.iter_rows(named=True)}
    for row in coll.listwise.iter_rows(named=True):
        assert len(row["doc_ids"]) <= 20 and sorted(row["doc_ids"]) == sorted(row["teacher_ranking"])
        k = len(pos[row["query_id"]])
        assert set(row["teacher_ranking"][:k]) == pos[row["query_id"]]


def test_listwise_jsonl_rejects_non_permutation(tmp_path):
    rec = {"query_id": "1", "query": "q", "candidates": [{"docid": "a", "text": "A"}, {"docid": "b", "text": "B"}],
           "ranking": ["a", "c"]}
    (tmp_path / "l.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(PosbiasError, match="l.jsonl:1: `ranking` must be a permutation"):
        listwise.load({"path": str(tmp_path / "l.jsonl"), "format": "jsonl"}, "datasets.l", seed=0)


def test_synthetic_is_deterministic_and_graded():
    spec = synthetic.SyntheticSpec(n_docs=300, n_test_queries=10, n_train_queries=20)
    a, b = synthetic.generate(spec, "train"), synthetic.generate(spec, "train")
    assert a.corpus.equals(b.corpus) and a.qrels.equals(b.qrels) and a.listwise.equals(b.listwise)
    test = synthetic.generate(spec, "test")
    assert test.corpus.equals(a.corpus)  # the two splits share the corpus
    assert not set(test.queries["query_id"].to_list()) & set(a.queries["query_id"].to_list())
    assert set(a.qrels["relevance"].unique().to_list()) == {0, 1, 2, 3}
    for row in a.listwise.iter_rows(named=True):
        assert len(row["doc_ids"]) == 20 and sorted(row["doc_ids"]) == sorted(row["teacher_ranking"])


def _in_fresh_process(code: str) -> subprocess.CompletedProcess:
    """ir_datasets fixes its cache root at import, so each cache root gets its own interpreter."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_irds_unknown_id(tmp_path):
    out = _in_fresh_process(
        "from posbias.data import irds\n"
        f"irds.load('cranfeld', {str(tmp_path)!r})"
    )
    assert "PosbiasError: datasets: ir_datasets id 'cranfeld' does not exist" in out.stderr


def test_irds_not_cached_offline_names_the_cache_file(tmp_path):
    out = _in_fresh_process(
        "from posbias.data import irds\n"
        f"irds.load('cranfield', {str(tmp_path / 'empty')!r})"
    )
    assert f"put the file at {tmp_path / 'empty' / 'cranfield' / 'cran.tar.gz'}" in out.stderr


def test_irds_cranfield_from_primed_cache(irds_home):
    out = _in_fresh_process(
        "from posbias import data\n"
        f"c = data.load('cranfield', {{'source': 'irds', 'id': 'cranfield'}}, 0, {str(irds_home)!r})\n"
        "print(c.corpus.height, c.queries.height, c.qrels.height)"
    )
    assert out.stdout.split() == ["1400", "225", "1837"], out.stderr[-2000:]


def test_toy_task_grades_listwise_order_and_oracle_agree():
    from posbias.data import toy
    from posbias.retrieval import oracle

    spec = toy.ToySpec(seed=7, n_test_queries=5, n_train_queries=40)
    train = toy.generate(spec, "train")
    assert train.queries.height == 40 and train.corpus.height == 40 * 20
    keys = {f"w{i}" for i in range(spec.keys)}
    grades = dict(zip(train.qrels["doc_id"], train.qrels["relevance"]))
    for doc_id, text in zip(train.corpus["doc_id"], train.corpus["text"]):
        assert len(text.split()) == 3 and sum(w in keys for w in text.split()) == grades[doc_id]
    per_query = train.qrels.group_by("query_id").agg(pl.col("relevance").sort(descending=True))
    assert all(r == [2, 1, 1, 1] + [0] * 16 for r in per_query["relevance"].to_list())
    assert not set(" ".join(train.queries["text"]).split()) & keys  # queries carry no relevance signal
    # the training lists' input order is the oracle first stage with the same seed and noise
    run, empty = oracle.search(train.qrels, train.queries, spec.first_stage_noise, 20, spec.seed)
    assert not empty
    first = {q: g.sort("rank")["doc_id"].to_list() for (q,), g in run.group_by("query_id")}
    for rec in train.listwise.iter_rows(named=True):
        assert rec["doc_ids"] == first[rec["query_id"]]
        assert [grades[d] for d in rec["teacher_ranking"]] == sorted((grades[d] for d in rec["doc_ids"]), reverse=True)
    # biased but not ideal: the best passage is first for some queries, not all
    at_one = sum(grades[rec["doc_ids"][0]] == 2 for rec in train.listwise.iter_rows(named=True)) / 40
    assert 0.2 < at_one < 0.8
    test = toy.generate(spec, "test")
    assert test.listwise is None and not set(test.corpus["doc_id"]) & set(train.corpus["doc_id"])
    assert toy.generate(spec, "test").corpus.equals(test.corpus)


def test_oracle_noise_dial():
    from posbias.retrieval import oracle

    qrels = pl.DataFrame({"query_id": ["q"] * 20, "doc_id": [f"d{i:02d}" for i in range(20)],
                          "relevance": [3 - i // 5 for i in range(20)]})
    queries = pl.DataFrame({"query_id": ["q", "unjudged"], "text": ["a", "b"]})
    ideal, empty = oracle.search(qrels, queries, 0.0, 10, seed=1)
    assert empty == ["unjudged"] and ideal.height == 10
    assert ideal["doc_id"].to_list()[:5] == [f"d{i:02d}" for i in range(5)]  # grade 3 first, ties by doc id
    noisy, _ = oracle.search(qrels, queries, 5.0, 20, seed=1)
    assert noisy["doc_id"].to_list() != sorted(noisy["doc_id"].to_list())
    assert oracle.search(qrels, queries, 5.0, 20, seed=1)[0].equals(noisy)


def test_sample_queries_keeps_a_seeded_sample_of_judged_queries():
    spec = {"source": "synthetic", "n_docs": 200, "n_test_queries": 40, "sample_queries": 10}
    a = data.load("s", spec, seed=3)
    b = data.load("s", spec, seed=3)
    full = data.load("s", {k: v for k, v in spec.items() if k != "sample_queries"}, seed=3)
    assert a.queries.height == 10 and a.queries.equals(b.queries)
    assert set(a.qrels["query_id"]) <= set(a.queries["query_id"]) and a.corpus.height == full.corpus.height
    assert sorted(a.queries["query_id"]) != sorted(full.queries["query_id"])[:10]  # a sample, not the first ten


def test_sample_queries_samples_a_listwise_training_sets_instances(shared_data):
    """On 0.17.0 a listwise set's ``sample_queries`` was ignored: every instance was kept."""
    spec = {"path": str(shared_data / "msmarco-train-sample/msmarco.json"), "format": "tevatron", "n_candidates": 20,
            "source": "listwise", "sample_queries": 30}
    coll = data.load("m", spec, seed=1)
    assert coll.listwise.height == 30 and set(coll.listwise["query_id"]) == set(coll.queries["query_id"])
    assert set(coll.qrels["query_id"]) <= set(coll.queries["query_id"])
    assert data.load("m", spec, seed=1).listwise.equals(coll.listwise)


def _conversation(qid, query, passages, answer, style):
    ids = [str(i + 1) if style == "numeric" else chr(65 + i) for i in range(len(passages))]
    user = (f"I will provide you with {len(passages)} passages, each indicated by a numerical identifier []. "
            f"Rank the passages based on their relevance to the search query: {query}.\n\n"
            + "\n".join(f"[{i}] {p}" for i, p in zip(ids, passages))
            + f"\n\nSearch Query: {query}.\nRank the {len(passages)} passages above based on their relevance to "
            "the search query. The output format should be [] > [], e.g., [2] > [1].")
    if style == "numeric":
        return {"id": qid, "conversations": [{"from": "system", "value": "You are RankLLM."},
                                             {"from": "human", "value": user}, {"from": "gpt", "value": answer}]}
    return {"id": qid, "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]}


def test_rank_llm_training_conversations_become_listwise_instances(tmp_path):
    import json

    passages = ["the cat sat. on a mat", "dogs bark", "stocks fell sharply"]
    lines = [_conversation("q1", "where do cats sit", passages, "[3] > [1] > [2]", "numeric"),
             _conversation("q2", "what do dogs do", passages[::-1], "[C] > [A]", "letters")]  # B left out
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    coll = data.load("t", {"source": "listwise", "path": str(path), "format": "rank_llm"}, seed=0)
    first, second = coll.listwise.row(0, named=True), coll.listwise.row(1, named=True)
    assert first["query"] == "where do cats sit" and first["texts"] == passages
    text_of = dict(zip(first["doc_ids"], first["texts"]))
    assert [text_of[d] for d in first["teacher_ranking"]] == ["stocks fell sharply", "the cat sat. on a mat", "dogs bark"]
    # the same passage text is one document in both instances; the left-out B is appended
    assert set(second["doc_ids"]) == set(first["doc_ids"]) and coll.corpus.height == 3
    assert [text_of[d] for d in second["teacher_ranking"]] == ["the cat sat. on a mat", "stocks fell sharply",
                                                                "dogs bark"]
    path.write_text(json.dumps({"id": "x", "conversations": [{"from": "human", "value": "no list here"},
                                                              {"from": "gpt", "value": "[1]"}]}) + "\n")
    with pytest.raises(PosbiasError, match=r"train.jsonl:1: the user turn has no `Search Query:` line"):
        data.load("t", {"source": "listwise", "path": str(path), "format": "rank_llm"}, seed=0)


def _ultrafeedback_rows():
    """Rows in openbmb/UltraFeedback's schema: an instruction and rated completions."""
    def completion(text, score):
        return {"model": "m", "response": text, "overall_score": score, "fine-grained_score": 3.0}

    return [
        {"source": "s", "instruction": "write a haiku", "models": ["m"] * 4,
         "completions": [completion("a", 7.5), completion("b", 3.0), completion("c", 9.0), completion("d", "N/A")]},
        {"source": "s", "instruction": "one rated only", "models": ["m"] * 2,
         "completions": [completion("x", 5.0), completion("y", None)]},
        {"source": "s", "instruction": "sum 2 and 2", "models": ["m"] * 2,
         "completions": [completion("4", 10.0), completion("5", 1.0)]},
    ]


def test_hf_response_sets_load_through_datasets_from_a_local_file(tmp_path):
    """source: hf_responses reads UltraFeedback's schema with datasets.load_dataset (here from a local
    JSON Lines file, as a cluster without hub access would): a prompt per query, a document per rated
    response in listed order, the rounded rating as its grade; split slicing selects prompts."""
    path = tmp_path / "uf.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _ultrafeedback_rows()))
    coll = data.load("uf", {"source": "hf_responses", "path": str(path)}, seed=0)
    assert coll.queries.to_dicts() == [{"query_id": "0", "text": "write a haiku"}, {"query_id": "2", "text": "sum 2 and 2"}]
    assert coll.corpus["doc_id"].to_list() == ["0-0", "0-1", "0-2", "2-0", "2-1"]  # "d" unrated; prompt 1 has one
    assert coll.qrels["relevance"].to_list() == [8, 3, 9, 10, 1]  # round(7.5) is 8 (half to even)
    sliced = data.load("uf", {"source": "hf_responses", "path": str(path), "split": "train[2:]"}, seed=0)
    assert sliced.queries["text"].to_list() == ["sum 2 and 2"]
    path.write_text(json.dumps({"prompt": "p", "responses": []}) + "\n")
    with pytest.raises(PosbiasError, match=r"datasets.uf: the rows have no \['instruction', 'completions'\]"):
        data.load("uf", {"source": "hf_responses", "path": str(path)}, seed=0)


def test_teacher_windows_slide_by_half_a_window_and_restrict_the_teachers_order():
    first_stage = [f"d{i}" for i in range(10)]
    teacher = ["d9", "d3", "d0", "d7", "d1"]  # d2, d4, d5, d6, d8 unranked
    windows = listwise.teacher_windows(first_stage, teacher, 4)
    assert [w for w, _ in windows] == [first_stage[0:4], first_stage[2:6], first_stage[4:8], first_stage[6:10]]
    assert windows[0][1] == ["d3", "d0", "d1", "d2"]  # the teacher's order, then the unranked in input order
    assert windows[3][1] == ["d9", "d7", "d6", "d8"]
    assert listwise.teacher_windows(first_stage[:3], teacher, 4) == [(first_stage[:3], ["d0", "d1", "d2"])]
    # a list that the windows do not end on exactly gets a last window ending at its end
    assert [w[0] for w, _ in listwise.teacher_windows([f"d{i}" for i in range(7)], [], 4)] == ["d0", "d2", "d3"]


def _rank_llm_candidates(path, qid, n):
    hits = [{"qid": qid, "docid": f"p{i}", "score": float(n - i), "content": f"passage {i}"} for i in range(n)]
    path.write_text(json.dumps([{"query": "what is it", "hits": hits}]))


def test_a_reranked_trec_run_is_a_listwise_teacher(tmp_path):
    """format trec_run: the first stage's candidates (rank_llm JSON) cut into windows, each window's target the
    teacher run's order restricted to it (rank_llm's RankGPT reranks of BM25 are such runs)."""
    _rank_llm_candidates(tmp_path / "cands.json", "q1", 30)
    order = [f"p{i}" for i in reversed(range(30))]  # the teacher reverses the first stage
    (tmp_path / "teacher.txt").write_text("".join(f"q1 Q0 {d} {r} {30 - r}.0 gpt\n" for r, d in enumerate(order, 1)))
    spec = {"path": str(tmp_path / "teacher.txt"), "candidates": str(tmp_path / "cands.json"), "format": "trec_run",
            "n_candidates": 20}
    coll = listwise.load(spec, "datasets.t", seed=0)
    rows = coll.listwise.to_dicts()
    assert [r["query_id"] for r in rows] == ["q1-w0", "q1-w1"]  # windows 0-19 and 10-29
    assert rows[0]["doc_ids"] == [f"p{i}" for i in range(20)] and rows[0]["teacher_ranking"] == rows[0]["doc_ids"][::-1]
    assert rows[1]["texts"][0] == "passage 10" and coll.corpus.height == 30 and coll.queries.height == 2
    with pytest.raises(PosbiasError, match=r"datasets\.t\.candidates: format trec_run needs"):
        listwise.load({**spec, "candidates": None}, "datasets.t", seed=0)
    (tmp_path / "other.txt").write_text("q9 Q0 p1 1 1.0 gpt\n")
    with pytest.raises(PosbiasError, match="no query of the teacher's run is among the candidates"):
        listwise.load({**spec, "path": str(tmp_path / "other.txt")}, "datasets.t", seed=0)
