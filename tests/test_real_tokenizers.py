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
    return {name: standins.build(name, root / name, with_model=name != "bert") for name in standins.STANDINS}


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
    """The Grades prompt of 10 real passages with its answer skeleton, canonical and with renamed markers,
    is the whole text's own tokenisation (tokenised piece by piece, Zephyr's gave "▁Gr" after the
    prompt's newline and a stray "▁" before every line), and each read position is followed by the
    placeholder digit token."""
    from posbias.scoring import GradesEncoder

    tok = tokenizers[name]
    encoder = GradesEncoder(tok, 40, 8192)
    digit = tok.decode([encoder.grades.ids[0]])
    for markers in (None, (4, 1, 10, 2, 9, 3, 8, 5, 7, 6)):
        ids, reads, _ = encoder.encode(dl19.query, dl19.texts[:10], markers)
        assert encoder.skeleton(markers or tuple(range(1, 11)))[2] == 0  # the prompt's own tokens stay
        text = prompts.render(tok, dl19.query, dl19.texts[:10], 40, None, message=prompts.grades_message,
                              markers=markers).text
        text += "Grades:" + "".join(f"\n[{m}] Grade{encoder.grades.tail}{digit}" for m in markers or range(1, 11))
        assert tok(text)["input_ids"] == ids
        assert len(reads) == 10 and all(ids[r + 1] == encoder.grades.ids[0] for r in reads)


def test_generated_tokens_count_the_eos_where_it_is_the_pad_token(built, dl19):
    """Zephyr pads with its EOS: counting the non-pad tokens dropped the EOS a row stopped at."""
    from posbias.rerankers.generation import generated_length

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
