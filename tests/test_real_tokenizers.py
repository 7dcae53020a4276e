"""The model path with the papers' real tokenizers (posbias.standins: Zephyr/Mistral's SentencePiece,
Qwen2.5's and Qwen3's byte-level BPE, BERT's WordPiece) on tiny random-init models of the real classes,
and real DL19 passages: every identifier the readout scores, every token the LM target trains and every
decoding step is a token sequence the tokenizer itself produces for that text in the real prompt.

All stand-ins are built once, in this module (about 30 s: converting the SentencePiece and tiktoken files).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from posbias import prompts, standins
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker, step_tokens
from posbias.rerankers.lm import LMSpec, identifier_token_ids
from posbias.training import TrainSpec, train
from posbias.training.listwise import encode_instances, target_text

CAUSAL = ("zephyr", "qwen2.5", "qwen3")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("standins")
    return {name: standins.build(name, root / name, with_model=True) for name in standins.STANDINS}


@pytest.fixture(scope="module")
def tokenizers(built):
    from transformers import AutoTokenizer

    return {name: AutoTokenizer.from_pretrained(path) for name, path in built.items()}


@pytest.fixture(scope="module")
def dl19(shared_data) -> Window:
    """The first DL19 query and its BM25 top 20 with their MS MARCO passage texts (rank_llm's file)."""
    path = shared_data / "trec-dl-2019/rank_llm/retrieve_results/BM25/retrieve_results_dl19.json"
    first = json.loads(path.read_text())[0]
    hits = first["hits"][:20]
    return Window(hits[0]["qid"], first["query"], [h["docid"] for h in hits], [h["content"] for h in hits])


def test_the_stand_ins_carry_the_real_token_ids(tokenizers, built):
    """The ids the real tokenizers give (their model cards' and our own checks), the real special tokens,
    and the real model classes with the real vocabulary sizes."""
    from transformers import AutoConfig

    zephyr, qwen25, qwen3, bert = (tokenizers[n] for n in ("zephyr", "qwen2.5", "qwen3", "bert"))
    assert zephyr("Hello world", add_special_tokens=False)["input_ids"] == [22557, 1526]
    assert zephyr("Hello world")["input_ids"] == [1, 22557, 1526]  # BOS <s>
    assert (zephyr.eos_token_id, zephyr.pad_token_id, len(zephyr)) == (2, 2, 32000)  # Zephyr pads with </s>
    for qwen in (qwen25, qwen3):
        assert qwen("Hello world")["input_ids"] == [9707, 1879]  # no BOS
        assert qwen.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [151643, 151644, 151645]
        # the pre-tokenizer merges "[" with a letter after a newline, not after a space
        assert qwen.convert_ids_to_tokens(qwen("\n[A] > [B]")["input_ids"]) == ["Ċ", "[A", "]", "Ġ>", "Ġ[", "B", "]"]
    assert qwen3.convert_tokens_to_ids(["<think>", "</think>"]) == [151667, 151668]
    assert "<think>" not in qwen25.get_vocab()
    assert bert("Hello world")["input_ids"] == [101, 7592, 2088, 102]  # [CLS] hello world [SEP]
    classes = {n: (c.architectures[0], c.vocab_size) for n in CAUSAL for c in [AutoConfig.from_pretrained(built[n])]}
    assert classes == {"zephyr": ("MistralForCausalLM", 32000), "qwen2.5": ("Qwen2ForCausalLM", 151936),
                       "qwen3": ("Qwen3ForCausalLM", 151936)}


def test_the_chat_formats_are_the_real_ones(tokenizers):
    turns = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]

    def chat(name: str) -> str:
        return tokenizers[name].apply_chat_template(turns, tokenize=False, add_generation_prompt=True,
                                                    enable_thinking=False)

    assert chat("zephyr") == "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\n"
    assert chat("qwen2.5") == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    assert chat("qwen3") == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                             "<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize("style", ["letters", "numbers"])
@pytest.mark.parametrize("name", CAUSAL)
def test_first_scores_the_tokens_the_tokenizer_produces_after_the_real_prompt(built, dl19, name, style):
    """For every identifier, the real prompt (20 DL19 passages) followed by ``X] > …`` tokenises as the
    prompt's own ids, then exactly the path First scores for X. With Qwen the prompt ends with " [" (after
    "\\n" the tokenizer would merge "[A" into one token, which a readout after a bare "[" never sees)."""
    first = FirstReranker(LMSpec(str(built[name]), identifiers=style, max_context=8192))
    tok = first.tokenizer
    text = prompts.render(tok, dl19.query, dl19.texts, first.spec.word_budget, first.spec.max_context,
                          first.readout.prefix, id_style=style).text
    prompt_ids = first.encode(dl19)
    assert tok(text)["input_ids"] == prompt_ids
    assert first.readout.prefix == (" [" if name.startswith("qwen") and style == "letters" else "[")
    for ident, path in zip(prompts.identifiers(20, style), first.paths):
        ids = tok(text + f"{ident}] > [")["input_ids"]
        assert ids[: len(prompt_ids)] == prompt_ids and tuple(ids[len(prompt_ids):][: len(path)]) == path, ident
    if style == "letters":
        assert all(len(p) == 1 for p in first.paths)  # FIRST's single-token readout holds for all three
    result = first.rank([dl19])[0]
    assert sorted(result.order) == list(range(20)) and len(set(result.scores)) > 1


@pytest.mark.parametrize("style", ["letters", "numbers"])
@pytest.mark.parametrize("name", CAUSAL)
def test_generation_steps_append_what_retokenising_the_answer_gives(built, dl19, name, style):
    """Sequential CapCal appends ``X] > [`` per step: the same ids as tokenising the real prompt with the
    answer so far, and each next identifier's path is what follows there."""
    gen = GenerationReranker(LMSpec(str(built[name]), identifiers=style, max_context=8192))
    tok = gen.tokenizer
    prompt = prompts.render(tok, dl19.query, dl19.texts, gen.spec.word_budget, gen.spec.max_context,
                            gen.readout.prefix, id_style=style)
    steps = step_tokens(tok, gen.spec.prompt, style, 20)
    ids = prompts.identifiers(20, style)
    answer, appended = "", list(prompt.input_ids)
    for k in (11, 0, 19, 9, 1):
        answer += f"{ids[k]}] > ["
        appended += list(steps[k])
        assert tok(prompt.text + answer, add_special_tokens=True)["input_ids"] == appended
        for j in (2, 14):
            full = tok(prompt.text + answer + ids[j] + "]", add_special_tokens=True)["input_ids"]
            assert tuple(full[len(appended):][: len(gen.paths[j])]) == gen.paths[j]


@pytest.mark.parametrize("name", CAUSAL)
def test_the_lm_target_is_what_the_tokenizer_produces_and_starts_at_the_read_token(tokenizers, dl19, name):
    """The training example is the real prompt and ranking tokenised as one text; its first answer token
    is the identifier id the rank loss and First read (identifier_token_ids) for the teacher's top passage."""
    tok = tokenizers[name]
    teacher = list(reversed(dl19.doc_ids))
    instances = pl.DataFrame([{"query_id": dl19.query_id, "query": dl19.query, "doc_ids": dl19.doc_ids,
                               "texts": dl19.texts, "teacher_ranking": teacher}])
    example = encode_instances(tok, instances, 100, 8192)[0]
    ids = identifier_token_ids(tok)
    prefix = " [" if name.startswith("qwen") else "["
    position = example["rank_position"]
    prompt_text = tok.decode(example["input_ids"][: position + 1], skip_special_tokens=False)
    whole = tok(prompt_text + target_text(dl19.doc_ids, teacher), add_special_tokens=False)["input_ids"]
    assert example["input_ids"] == whole + [tok.eos_token_id]
    assert prompt_text.endswith("\n" + prefix)
    assert example["input_ids"][position + 1] == ids[dl19.doc_ids.index(teacher[0])]
    assert example["labels"][position + 1:] == example["input_ids"][position + 1:]


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_capcal_presets_fine_tune_runs_a_training_step_on_the_qwen3_stand_in(built, dl19, tmp_path, lora):
    """config/paper/capcal.yaml's qwen3-0.6b-randaug (First on Qwen3 with shuffled lists) takes an
    optimiser step on the Qwen3 stand-in, full and with LoRA: before, its encoding stopped with "this
    tokenizer merges '[' with the identifier"."""
    short = [" ".join(t.split()[:12]) for t in dl19.texts[:8]]
    rng = np.random.default_rng(0)
    rows = [{"query_id": f"{dl19.query_id}-{i}", "query": dl19.query, "doc_ids": dl19.doc_ids[:8], "texts": short,
             "teacher_ranking": [dl19.doc_ids[j] for j in rng.permutation(8)]} for i in range(2)]
    extra = {"lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}} if lora else {}
    spec = TrainSpec.create(method="first", learning_rate=1e-3, max_steps=1, batch_size=2, grad_accum=1,
                            save_steps=100, logging_steps=1, max_context=8192, **extra)
    curve = train(str(built["qwen3"]), pl.DataFrame(rows), spec, tmp_path / "work", tmp_path / "out")
    assert curve.height == 1 and np.isfinite(curve["rank_loss"][0]) and np.isfinite(curve["lm_loss"][0])


@pytest.mark.parametrize("name", CAUSAL)
def test_the_grades_skeleton_is_what_the_tokenizer_produces_and_each_slot_reads_its_digit(tokenizers, dl19, name):
    """The Grades prompt of 10 real passages with its answer skeleton (the paper's and the second one),
    canonical and with renamed markers, is the whole text's own tokenisation (tokenised piece by piece,
    Zephyr's gave "▁Gr" after the prompt's newline and a stray "▁" before every line), and each read
    position is followed by the placeholder digit token, the same token under both skeletons."""
    from posbias.prompts import SKELETONS
    from posbias.scoring import GradesEncoder

    tok = tokenizers[name]
    encoder = GradesEncoder(tok, 40, 8192)
    digit = tok.decode([encoder.grades.ids[0]])
    for skeleton in SKELETONS:
        header, label = SKELETONS[skeleton].header, SKELETONS[skeleton].label
        for markers in (None, (4, 1, 10, 2, 9, 3, 8, 5, 7, 6)):
            ids, reads, _ = encoder.encode(dl19.query, dl19.texts[:10], markers, skeleton)
            assert encoder.skeleton(markers or tuple(range(1, 11)), skeleton)[2] == 0  # the prompt's tokens stay
            text = prompts.render(tok, dl19.query, dl19.texts[:10], 40, None, message=prompts.grades_message,
                                  markers=markers).text
            tail = encoder._tail(skeleton)
            text += header + "".join(f"\n[{m}] {label}{tail}{digit}" for m in markers or range(1, 11))
            assert tok(text)["input_ids"] == ids, (skeleton, markers)
            assert len(reads) == 10 and all(ids[r + 1] == encoder.grades.ids[0] for r in reads)


def test_generated_tokens_count_the_eos_where_it_is_the_pad_token(built, dl19):
    """Zephyr pads with its EOS: counting the non-pad tokens dropped the EOS a row stopped at."""
    from posbias.engines.hf import generated_length

    assert generated_length([5, 7, 2, 2, 2], {2}) == 3  # EOS = pad = 2: three tokens were generated
    assert generated_length([5, 7, 9], {2}) == 3 and generated_length([2, 0, 0], {2}) == 1
    gen = GenerationReranker(LMSpec(str(built["zephyr"]), max_context=8192))
    result = gen.rank([dl19])[0]
    assert gen.stats["generated_tokens"] == result.stats["calls"] and sorted(result.order) == list(range(20))


@pytest.mark.parametrize("name", CAUSAL)
def test_a_training_example_fits_the_context_with_its_whole_answer(tokenizers, dl19, name):
    """With a context too small for 20 DL19 passages at 100 words, passages are cut (and counted) so
    that the prompt and the whole ranking with its EOS fit; before, only the prompt was fitted and the
    ~80-token answer ran past max_context."""
    tok = tokenizers[name]
    instances = pl.DataFrame([{"query_id": dl19.query_id, "query": dl19.query, "doc_ids": dl19.doc_ids,
                               "texts": dl19.texts, "teacher_ranking": dl19.doc_ids}])
    example = encode_instances(tok, instances, 100, 900)[0]
    position = example["rank_position"]
    assert len(example["input_ids"]) <= 900 and example["truncated"] > 0
    answer = tok.decode(example["input_ids"][position + 1:], skip_special_tokens=True)
    assert answer.replace(" ", "") == target_text(dl19.doc_ids, dl19.doc_ids).replace(" ", "")


@pytest.mark.parametrize(("name", "hf_id", "mode", "style", "method"), [
    ("zephyr", "HuggingFaceH4/zephyr-7b-beta", "first", "letters", "none"),
    ("zephyr", "castorini/rank_zephyr_7b_v1_full", "generation", "numbers", "capcal"),
    ("qwen2.5", "Qwen/Qwen2.5-7B-Instruct", "generation", "numbers", "capcal"),
    ("qwen3", "Qwen/Qwen3-0.6B", "first", "letters", "capcal"),
    ("qwen3", "Qwen/Qwen3-4B", "grades", "letters", "none"),
])
def test_the_plan_counts_a_preset_model_off_disk_with_its_familys_real_tokenizer(built, dl19, name, hf_id, mode,
                                                                                style, method):
    """A preset's HF id that is not on disk is counted with the stand-in of its family: the same calls
    and tokens as counting with that tokenizer's folder on disk, marked an estimate and named. Before,
    the rule of thumb took "10" … "20" for one token each: sequential CapCal with numeric identifiers
    (capcal.yaml's ``*-numbers``) was planned without the extra forward pass a two-token number takes."""
    from posbias import config, debias, plan
    from posbias.rerank import Candidates, rerank

    entry = {**config.model_defaults("causal_lm"), "kind": "causal_lm", "mode": mode, "identifiers": style}
    cfg = {"seed": 0, "models": {"hub": {**entry, "path": hf_id}, "disk": {**entry, "path": str(built[name])}}}
    lists = [Candidates(str(dl19.query_id), dl19.query, dl19.doc_ids, dict(zip(dl19.doc_ids, dl19.texts)))]
    reranking = config.defaults("reranking")

    def cost(counting):
        reranker = debias.wrap(counting.reranker, method, 0, debias.options(reranking, method))
        return rerank(reranker, lists, 20, 10, 4)[2].select("windows", "calls", "prompt_tokens")

    standin = plan.counting_reranker(cfg, "hub", {}, 100, built[name].parent)
    own = plan.counting_reranker(cfg, "disk", {}, 100, built[name].parent)
    assert (standin.exact, own.exact) == (False, True)
    assert standin.tokenizer == f"stand-in {name}: {standins.STANDINS[name].source}"
    assert own.tokenizer == f"own ({built[name]})"
    expected = cost(own)  # a reranker's first cost (CapCal keeps its prior for the next)
    assert cost(standin).equals(expected)
    shared: dict = {}  # a plan's tokenizers: one memoised tokenizer for every model of the family, same counts
    first, again = (plan.counting_reranker(cfg, "hub", {}, 100, built[name].parent, shared) for _ in range(2))
    assert list(shared) == [standin.tokenizer] and cost(first).equals(expected) and cost(again).equals(expected)
    with pytest.MonkeyPatch.context() as patch:  # the same id with no stand-in of its family: the rule of thumb
        patch.setattr(standins, "for_model", lambda path: None)
        thumb = plan.counting_reranker(cfg, "hub", {}, 100, built[name].parent)
    assert thumb.tokenizer == plan.RULE_OF_THUMB and not thumb.exact
    if style == "numbers":  # 10 … 20 are two tokens in both real tokenizers: one more pass each to read them
        assert cost(standin)["calls"][0] > cost(thumb)["calls"][0]


@pytest.mark.parametrize("name", CAUSAL)
def test_a_generation_prompt_leaves_room_for_its_answer(built, dl19, name):
    """A context too small for 20 DL19 passages at 100 words: the generation prompt is cut (counted in
    the stats) so that it and the longest answer generate() may write fit max_context; sequential
    CapCal's prompt leaves room for every step it appends. Before, the prompt alone was fitted."""
    from posbias.rerankers.generation import max_new_tokens

    gen = GenerationReranker(LMSpec(str(built[name]), identifiers="numbers", max_context=1200))
    prompt = prompts.render(gen.tokenizer, dl19.query, dl19.texts, gen.spec.word_budget, 1200 - max_new_tokens(20),
                            style=gen.spec.prompt, id_style="numbers")
    result = gen.rank([dl19])[0]
    assert result.stats["prompt_tokens"] == len(prompt.input_ids) <= 1200 - max_new_tokens(20)
    assert gen.stats["truncated_passages"] == prompt.truncated > 0
    from posbias.rerankers import generation

    read, scores = [], generation.identifier_scores

    def recording(engine, encoded, paths, normalise):  # the longest sequence each forward pass reads
        read.append(max(len(e) for e in encoded) + max(len(p) - 1 for row in paths for p in row))
        return scores(engine, encoded, paths, normalise)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generation, "identifier_scores", recording)
        before = gen.stats["truncated_passages"]
        calibrated = gen.rank_with_priors([dl19], lambda real, empty: real, "[empty]")[0]
    assert sorted(calibrated.order) == list(range(20)) and len(read) == 21  # the prior once, then 20 steps
    assert gen.stats["truncated_passages"] > before and max(read) <= 1200


@pytest.mark.parametrize("name", CAUSAL)
def test_capcals_content_free_prompt_is_read_where_the_tokenizer_puts_the_identifiers(built, dl19, name):
    """CapCal's prior reads the same identifier paths after the content-free prompt (every passage the
    configured placeholder): each is what the tokenizer produces after that prompt's end too."""
    from posbias import config, debias

    first = FirstReranker(LMSpec(str(built[name]), max_context=8192))
    tok, placeholder = first.tokenizer, debias.placeholder(config.defaults("reranking")["capcal"])
    empty = Window("", dl19.query, [""] * 20, [placeholder] * 20)
    text = prompts.render(tok, dl19.query, empty.texts, first.spec.word_budget, first.spec.max_context,
                          first.readout.prefix).text
    encoded = first.encode(empty)
    assert tok(text)["input_ids"] == encoded and placeholder in text
    for ident, path in zip(prompts.identifiers(20, "letters"), first.paths):
        ids = tok(text + f"{ident}] > [")["input_ids"]
        assert ids[: len(encoded)] == encoded and tuple(ids[len(encoded):][: len(path)]) == path, ident
    (p_real, p_empty, cost), = first.content_free_inputs([dl19], placeholder)
    assert len(p_real) == len(p_empty) == 20 and cost["calls"] == 2 and p_real != p_empty


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("name", CAUSAL)
def test_silver_labels_and_an_ocsft_step_on_real_tokenizers(built, dl19, tmp_path, name, lora):
    """The silver stage with a Grades teacher on the stand-in (20 DL19 passages, windows of 10, the anchor
    and 2 shuffled views), its OC-SFT instances, and one OC-SFT optimiser step with two views (full and
    LoRA): every label in [0, 1], every passage of every view labelled once, a view's label the one the
    scorer gives that window, and finite supervised and consistency terms."""
    from posbias import silver
    from posbias.data.collection import corpus_frame, queries_frame
    from posbias.scoring import GradesScorer

    qid = str(dl19.query_id)
    short = [" ".join(t.split()[:30]) for t in dl19.texts]
    corpus = corpus_frame(dl19.doc_ids, short)
    queries = queries_frame([qid], [dl19.query])
    first_stage = pl.DataFrame({"query_id": [qid] * 20, "doc_id": dl19.doc_ids, "rank": list(range(1, 21)),
                                "score": [float(20 - i) for i in range(20)]})
    teacher = GradesScorer(LMSpec(str(built[name]), max_context=8192), window=10)
    labels, cost = silver.silver_labels(teacher, first_stage, queries, corpus, {}, 0, 20, 10, 2, None, 4)
    assert labels.height == 60 and labels.group_by("view").agg(pl.col("doc_id").n_unique())["doc_id"].to_list() == [20] * 3
    assert labels["score"].is_between(0, 1).all() and cost["windows"][0] == 6
    anchor = labels.filter((pl.col("view") == 0) & (pl.col("window") == 0)).sort("slot")
    window = Window(qid, dl19.query, anchor["doc_id"].to_list(),
                    [short[dl19.doc_ids.index(d)] for d in anchor["doc_id"]])
    assert np.allclose(teacher.rank([window])[0].scores, anchor["score"].to_list(), atol=1e-5)
    instances = silver.instances(labels, queries, corpus, averaged=False)
    assert instances.height == 2 and all(len(t) == 10 for t in instances["targets"])
    extra = {"lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}} if lora else {}
    spec = TrainSpec.create(method="ocsft", learning_rate=1e-3, max_steps=1, batch_size=2, grad_accum=1,
                            save_steps=100, logging_steps=1, views=2, consistency=1.0, consistency_warmup=0,
                            max_context=8192, **extra)
    curve = train(str(built[name]), instances, spec, tmp_path / "work", tmp_path / "out")
    assert curve.height == 1 and np.isfinite(curve["supervised_loss"][0]) and curve["consistency_loss"][0] > 0


def test_splade_encodes_and_searches_dl19_with_berts_wordpiece(built, dl19, tokenizers, tmp_path):
    """SPLADE++'s path (pyserini's document and query encoders, a Lucene impact index) on the BERT
    stand-in (``BertForMaskedLM`` with the 30,522 uncased WordPiece pieces): every impact term is a piece
    of that vocabulary, and the DL19 query finds the indexed passages."""
    from posbias.data.collection import corpus_frame, queries_frame
    from posbias.retrieval import splade

    corpus = corpus_frame(dl19.doc_ids, dl19.texts)
    vocab = tokenizers["bert"].get_vocab()
    impacts = dict(splade._encode(corpus, str(built["bert"]), 4, 256, "cpu"))
    assert set(impacts) == set(dl19.doc_ids) and all(impacts.values())
    assert all(term in vocab for vec in impacts.values() for term in vec)
    splade.build_index(corpus, tmp_path / "spl", str(built["bert"]), 4, 256, "cpu", 1)
    run, empty = splade.search(tmp_path / "spl", queries_frame([dl19.query_id], [dl19.query]), 10,
                               str(built["bert"]), "cpu", 1)
    assert not empty and run.height == 10 and set(run["doc_id"]) <= set(dl19.doc_ids)
