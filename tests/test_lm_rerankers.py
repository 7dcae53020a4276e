"""First and generation ranking with a tiny causal LM built locally (no hub)."""

from pathlib import Path

import numpy as np
import pytest

from posbias import config, debias, prompts
from posbias.debias import capcal_scores
from posbias.errors import PosbiasError
from posbias.models import build_tiny_causal_lm
from posbias.rerank import Candidates, rerank
from posbias.rerankers import Window
from posbias.rerankers.first import FirstReranker
from posbias.rerankers.generation import GenerationReranker, parse_ranking, step_tokens
from posbias.rerankers.lm import LMSpec, identifier_token_ids, readout

DEFAULTS = config.defaults("reranking")  # the schema's PermSC and CapCal settings


def _wrap(base, name, reranking=DEFAULTS):
    return debias.wrap(base, name, 0, debias.options(reranking, name))
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def _text(i, n=60):
    rng = np.random.default_rng(i)
    return " ".join(rng.choice(WORDS, n))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("models") / "tiny"
    build_tiny_causal_lm([_text(i) for i in range(200)], out, vocab_size=600, hidden=32, layers=2, heads=2,
                         max_length=4096, seed=0)
    return out


def _windows(n_windows, size=20):
    return [Window(f"q{i}", f"query {WORDS[i]}", [f"d{i}-{j}" for j in range(size)],
                   [_text(100 * i + j, 40 + j) for j in range(size)]) for i in range(n_windows)]


def test_prompt_format():
    text = prompts.user_message("what is x", ["first passage", "second passage"])
    assert text.startswith("I will provide you with 2 passages, each indicated by a alphabetical identifier []. ")
    assert "[A] first passage\n[B] second passage\n" in text
    assert "Search Query: what is x." in text and "e.g., [B] > [A]" in text
    with pytest.raises(ValueError, match="at most 20"):
        prompts.identifiers(21)


def test_identifiers_are_single_tokens(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    ids = identifier_token_ids(tok)
    assert len(set(ids)) == 20
    assert tok.convert_ids_to_tokens(ids) == list(prompts.IDENTIFIERS)


def test_multi_token_identifier_is_an_error(tmp_path):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[": 1, "a": 2, **{c: 3 + i for i, c in enumerate(prompts.IDENTIFIERS[1:])}}
    wl = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    wl.normalizer = normalizers.Replace("A", " a a")  # the letter A becomes two tokens
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="[UNK]")
    with pytest.raises(PosbiasError, match="identifier 'A' after '\\[' is not a single token .* mode: generation"):
        identifier_token_ids(tok)


def test_missing_model_path():
    with pytest.raises(PosbiasError, match="model path ./nowhere/model does not exist"):
        FirstReranker(LMSpec("./nowhere/model"))


def test_first_is_deterministic_and_batch_size_invariant(tiny):
    windows = _windows(6, 20) + _windows(3, 7)  # mixed lengths exercise left padding
    one = FirstReranker(LMSpec(str(tiny), batch_size=1)).rank(windows)
    eight = FirstReranker(LMSpec(str(tiny), batch_size=8)).rank(windows)
    again = FirstReranker(LMSpec(str(tiny), batch_size=8)).rank(windows)
    for a, b, c in zip(one, eight, again):
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)
        assert b.scores == c.scores and b.order == c.order
        assert sorted(a.order) == list(range(len(a.order)))


def test_long_passages_are_truncated_and_counted(tiny):
    reranker = FirstReranker(LMSpec(str(tiny), max_context=600, word_budget=300))
    window = Window("q", "query", [f"d{j}" for j in range(5)], [_text(j, 500) for j in range(5)])
    result = reranker.rank([window])[0]
    assert len(result.scores) == 5
    assert reranker.stats["truncated_passages"] == 5
    assert len(reranker.encode(window)) <= 600 + 1
    # a context too short even for one word a passage: one line with the fix (0.17.0: a bare ValueError)
    short = FirstReranker(LMSpec(str(tiny), max_context=20, word_budget=300))
    with pytest.raises(PosbiasError, match=r"^prompt: even with 1 word per passage the prompt has \d+ tokens, more than "
                                           r"the 20 the model may read; raise the models entry's max_context"):
        short.rank([window])


def test_generation_parsing():
    assert parse_ranking("[B] > [A] > [C]", 3) == ([1, 0, 2], 0)
    assert parse_ranking("[B] > [B] > [Z] > [A]", 4) == ([1, 0, 2, 3], 2)  # duplicate and out of range dropped
    assert parse_ranking("no idea", 3) == ([0, 1, 2], 3)


def test_generation_ranks_and_counts(tiny):
    reranker = GenerationReranker(LMSpec(str(tiny), batch_size=2))
    results = reranker.rank(_windows(2, 5))
    assert all(sorted(r.order) == list(range(5)) for r in results)
    assert reranker.stats["generated_tokens"] > 0
    assert reranker.stats["missing_ids"] == sum(r.stats["missing_ids"] for r in results)


def test_empty_candidate_list_and_wide_window(tiny):
    reranker = FirstReranker(LMSpec(str(tiny)))
    run, log, cost = rerank(reranker, [Candidates("q", "x", [], {})])
    assert run.height == 0 and log.height == 0 and cost.to_dicts() == [
        {"query_id": "q", "windows": 0, "calls": 0, "prompt_tokens": 0, "seconds": 0.0}]
    docs = [f"d{i}" for i in range(25)]
    with pytest.raises(ValueError, match="more identifiers than the 20 letters"):
        rerank(reranker, [Candidates("q", "x", docs, {d: d for d in docs})], window=25, step=10)


def test_cost_per_query_and_debiased_first(tiny):
    first = FirstReranker(LMSpec(str(tiny), batch_size=4))
    docs = [f"d{i}" for i in range(25)]
    texts = {d: _text(i, 30) for i, d in enumerate(docs)}
    lists = [Candidates("q1", "alpha", docs, texts), Candidates("q2", "beta", docs[:20], texts)]
    run, log, cost = rerank(first, lists, window=20, step=10)
    by_q = {r["query_id"]: r for r in cost.to_dicts()}
    assert by_q["q1"]["windows"] == 2 and by_q["q2"]["windows"] == 1
    assert by_q["q1"]["calls"] == 2 and by_q["q1"]["prompt_tokens"] > by_q["q2"]["prompt_tokens"] > 0
    assert all(r["seconds"] > 0 for r in by_q.values())
    _, _, psc_cost = rerank(_wrap(first, "permsc-window@3"), lists, window=20, step=10)
    assert psc_cost["calls"].to_list() == [6, 3]
    capcal = _wrap(first, "capcal")
    run_c, _, cap_cost = rerank(capcal, lists, window=20, step=10)
    # one content-free prior per (query, window size): q1 needs it once, q2 once
    assert cap_cost["calls"].to_list() == [3, 2]
    assert sorted(run_c.filter(run_c["query_id"] == "q1")["doc_id"].to_list()) == sorted(docs)


def test_sequential_capcal_for_generation(tiny):
    gen = GenerationReranker(LMSpec(str(tiny)))
    windows = _windows(1, 4)
    out = _wrap(gen, "capcal").rank(windows)[0]
    # one pass per emitted identifier and one for the window's content-free prior
    assert sorted(out.order) == [0, 1, 2, 3] and out.stats["calls"] == 5
    # alpha = 0 reproduces constrained greedy decoding over the remaining identifiers
    plain = gen.rank_with_priors(windows, lambda p, q: list(p), "")[0]
    zero = GenerationReranker(LMSpec(str(tiny))).rank_with_priors(
        windows, lambda p, q: capcal_scores(p, q, alpha=0.0), "")[0]
    assert plain.order == zero.order


def test_sequential_capcal_reads_the_prior_once_per_window(tiny):
    """"CapCal 仅需一次额外的前向传播（用于估计先验）": the content-free prompt is read once, and each step's
    prior is that one distribution renormalised over the passages still to place."""
    from scipy.special import softmax

    gen = GenerationReranker(LMSpec(str(tiny)))
    window = _windows(1, 4)[0]
    reads: list[list[list[int]]] = []
    engine_next_token = gen.engine.next_token
    gen.engine.next_token = lambda prompts, *a, **k: (reads.append(prompts), engine_next_token(prompts, *a, **k))[1]
    seen: list[np.ndarray] = []
    order = gen.rank_with_priors([window], lambda p, q: (seen.append(np.asarray(q)), p)[1], "")[0].order
    assert [len(r) for r in reads] == [1] * 5  # the prior, then one read of the real prompt per step
    assert len({tuple(r[0]) for r in reads[1:]}) == 4  # each step's real prompt grows by the emitted identifier
    assert len(seen) == 4
    for step, q in enumerate(seen):
        remaining = [i for i in range(4) if i not in order[:step]]
        np.testing.assert_allclose(q, seen[0][remaining] / seen[0][remaining].sum(), rtol=1e-6)
    gen.engine.next_token = engine_next_token
    (logits,) = gen.engine.next_token([reads[0][0]], [[p[0] for p in gen.paths[:4]]], normalise=False)
    np.testing.assert_allclose(seen[0], softmax(logits), rtol=1e-5)


def test_numeric_identifier_prompt_and_parsing():
    text = prompts.user_message("what is x", ["first passage", "second passage"], style="numbers")
    assert text.startswith("I will provide you with 2 passages, each indicated by a numerical identifier []. ")
    assert "[1] first passage\n[2] second passage\n" in text and "e.g., [2] > [1]" in text
    assert parse_ranking("[2] > [12] > [1] > [B] > [21]", 12, "numbers") == (
        [1, 11, 0] + [i for i in range(12) if i not in (0, 1, 11)], 9)


@pytest.fixture(scope="module", params=["bpe", "metaspace"])
def tiny_by_tokenizer(request, tmp_path_factory) -> Path:
    """A byte-level (GPT/Qwen-like) and a SentencePiece-style (Llama/Mistral-like) tiny model: both
    split multi-digit numbers into several tokens after '['."""
    out = tmp_path_factory.mktemp("models") / request.param
    build_tiny_causal_lm([_text(i) for i in range(200)], out, vocab_size=600, hidden=32, layers=2, heads=2,
                         max_length=4096, seed=0, tokenizer=request.param)
    return out


def test_numeric_identifiers_are_scored_by_their_whole_path(tiny_by_tokenizer):
    """[1] … [20]: prefix-free token paths read in context; each score equals the log-probability of the
    identifier's path computed by one full forward pass per identifier; the 20 probabilities sum to at
    most 1; the cost counts one extra pass per shared prefix. Letters stay single tokens (FIRST's logits)."""
    import torch

    first = FirstReranker(LMSpec(str(tiny_by_tokenizer), identifiers="numbers"))
    paths = first.paths
    assert len(paths) == 20 and any(len(p) > 1 for p in paths)
    assert not any(a != b and b[: len(a)] == a for a in paths for b in paths)  # prefix-free
    decoded = [first.tokenizer.decode(list(p)).replace(" ", "") for p in paths]
    assert all(d in (str(i), f"{i}]") for i, d in zip(range(1, 21), decoded)), decoded
    window = _windows(1, 20)[0]
    result = first.rank([window])[0]
    encoded = first.encode(window)
    with torch.inference_mode():
        brute = []
        for path in paths:
            logp = torch.log_softmax(first.engine.model(torch.tensor([encoded + list(path)])).logits[0].float(), -1)
            brute.append(sum(float(logp[len(encoded) - 1 + t, tok]) for t, tok in enumerate(path)))
    np.testing.assert_allclose(result.scores, brute, atol=1e-4)
    assert np.exp(result.scores).sum() <= 1.0 + 1e-6
    prefixes = {p[:t] for p in paths for t in range(1, len(p))}
    assert result.stats["calls"] == 1 + len(prefixes) and result.stats["prompt_tokens"] > len(encoded)
    assert all(len(p) == 1 for p in readout(first.tokenizer, "rankzephyr", "letters", 20).paths)
    capcal = _wrap(first, "capcal").rank([window])[0]
    assert sorted(capcal.order) == list(range(20))
    gen = GenerationReranker(LMSpec(str(tiny_by_tokenizer), identifiers="numbers"))
    sequential = _wrap(gen, "capcal").rank(_windows(1, 12))[0]
    assert sorted(sequential.order) == list(range(12)) and sequential.stats["calls"] > 2 * 12


@pytest.mark.parametrize("style", ["letters", "numbers"])
def test_sequential_capcal_appends_what_retokenising_the_answer_gives(tiny_by_tokenizer, style):
    """Each decoding step appends the tokens of ``X] > [`` (step_tokens) to the prompt: the same ids as
    tokenising the whole prompt with the answer so far, for a byte-level and a SentencePiece-style
    tokenizer; and sequential CapCal counts α at every one of its n steps."""
    gen = GenerationReranker(LMSpec(str(tiny_by_tokenizer), identifiers=style))
    window = _windows(1, 12)[0]
    prompt = prompts.render(gen.tokenizer, window.query, window.texts, gen.spec.word_budget, gen.spec.max_context,
                            gen.readout.prefix, id_style=style)
    steps = step_tokens(gen.tokenizer, gen.spec.prompt, style, 20)
    ids = prompts.identifiers(12, style)
    answer, appended = "", list(gen.tokenizer(prompt.text, add_special_tokens=True)["input_ids"])
    for k in (11, 0, 9, 1):
        answer += f"{ids[k]}] > ["
        appended += list(steps[k])
        assert gen.tokenizer(prompt.text + answer, add_special_tokens=True)["input_ids"] == appended
    wrapped = _wrap(gen, "capcal")
    assert sorted(wrapped.rank([window])[0].order) == list(range(12)) and gen.stats["capcal_steps"] == 12
    assert gen.stats["capcal_adaptive_steps"] == 12 and 0 <= gen.stats["capcal_alpha_sum"] <= 12


def test_capcal_placeholder_variants_change_the_content_free_prompt(tiny):
    """capcal@NAME reads reranking.capcal.variants.NAME: its placeholder repeated placeholder_length
    times replaces every passage; a different placeholder gives a different prior."""
    reranking = {**DEFAULTS, "capcal": {**DEFAULTS["capcal"], "variants": {
        "na-30": {"placeholder": "N/A", "placeholder_length": 30}, "na-1": {"placeholder": "N/A", "placeholder_length": 1}}}}
    assert debias.placeholder(debias.options(reranking, "capcal@na-30")) == " ".join(["N/A"] * 30)
    assert debias.placeholder(debias.options(reranking, "capcal")) == ""
    windows = _windows(2, 20)
    priors = {}
    for name in ("capcal", "capcal@na-1", "capcal@na-30"):
        wrapped = _wrap(FirstReranker(LMSpec(str(tiny))), name, reranking)
        assert wrapped.placeholder == debias.placeholder(debias.options(reranking, name))
        priors[name] = wrapped.base.content_free_inputs(windows, wrapped.placeholder)[0][1]
    assert priors["capcal@na-1"] != priors["capcal@na-30"] != priors["capcal"]


def test_qwen3_style_template_gets_enable_thinking_false(tiny):
    """Qwen3's chat template opens a thinking block unless ``enable_thinking`` is false; the prompt passes
    it, so the answer's "[" follows an empty think block; templates without the variable ignore it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and "
                         "enable_thinking is false %}<think></think>{% endif %}{% endif %}")
    text = prompts.render(tok, "q", ["p"], 300, answer_prefix="[").text
    assert text.endswith("<|assistant|><think></think>[") and text.startswith("<|system|>" + prompts.SYSTEM)
    # the Grades scorer: its own 4-level grading system turn, and no thinking block either
    grades = prompts.render(tok, "q", ["p"], 300, message=prompts.grades_message).text
    assert grades.startswith("<|system|>" + prompts.GRADES_SYSTEM) and grades.endswith("<|assistant|><think></think>")
    assert prompts.SYSTEM not in grades and "0 (irrelevant), 1 (related)" in prompts.GRADES_SYSTEM
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert prompts.render(tok, "q", ["p"], 300).text.endswith("do not say any word or explain.")


def test_compact_prompt_puts_identifiers_after_passages():
    text = prompts.compact_text("w7 w8", ["w1 w9 w10", "w11 w12 w13"])
    assert text == "query : w7 w8 w1 w9 w10 [A] w11 w12 w13 [B] query : w7 w8 answer : "
    with pytest.raises(ValueError, match="listwise only"):
        prompts.render(None, "q", ["p"], 300, message=prompts.grades_message, style="compact")
    with pytest.raises(ValueError, match="prompt style 'chat'"):
        prompts.render(None, "q", ["p"], 300, style="chat")


def test_word_tokenizer_gives_one_token_per_word(tmp_path):
    from transformers import AutoTokenizer

    corpus = [" ".join(f"w{(i * 7 + j) % 60}" for j in range(3)) for i in range(200)]
    build_tiny_causal_lm(corpus, tmp_path / "m", vocab_size=200, hidden=16, layers=1, heads=2, max_length=256,
                         seed=0, tokenizer="word")
    tok = AutoTokenizer.from_pretrained(tmp_path / "m")
    passages = ["w1 w2 w3"] * 20
    prompt = prompts.render(tok, "w4 w5", passages, 300, max_tokens=256, answer_prefix="[", style="compact")
    assert len(prompt.input_ids) == 4 + 20 * 6 + 7  # query : q q, 20 x (3 words [ X ]), query : q q answer : [
    assert "<unk>" not in tok.convert_ids_to_tokens(prompt.input_ids)
    assert tok.convert_ids_to_tokens(identifier_token_ids(tok)) == list(prompts.IDENTIFIERS)
    scores = FirstReranker(LMSpec(str(tmp_path / "m"), prompt="compact")).rank(
        [Window("q", "w4 w5", [f"d{i}" for i in range(20)], passages)])[0].scores
    assert len(scores) == 20
    with pytest.raises(ValueError, match="tiny.tokenizer 'char'"):
        build_tiny_causal_lm(corpus, tmp_path / "x", 200, 16, 1, 2, 256, 0, tokenizer="char")
