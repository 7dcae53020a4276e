"""Same config, same bytes: the tiny models the workflow builds are identical from one process to the next.

Tokenizer training is where run-dependent state crept in (tokenizers' WordPiece trainer numbered its
alphabet and broke ties between equally frequent merges in a hash map's order, so the tiny SPLADE's
vocabulary differed at its cut-off), so every tiny build runs twice, each in a fresh interpreter, the
SPLADE one three times in each, from the default run's texts and sizes, and the files are compared by
hash.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

BUILD = """
import sys
from pathlib import Path
from posbias.data import synthetic
from posbias.data.collection import passage_texts
from posbias.models import build_tiny_causal_lm, build_tiny_masked_lm
# the default run's tiny SPLADE input: the synthetic corpus's passage texts and 4,000 pieces
texts = list(passage_texts(synthetic.generate(synthetic.SyntheticSpec(seed=42), "test").corpus).values())
out = Path(sys.argv[1])
for copy in range(3):  # the old trainer's ties fell differently within one process too
    build_tiny_masked_lm(texts, out / f"splade{copy}", vocab_size=4000, hidden=16, layers=1, heads=2,
                         max_length=128, seed=0)
for kind in ("bpe", "metaspace", "word"):
    build_tiny_causal_lm(texts[:600], out / kind, vocab_size=600, hidden=16, layers=1, heads=2, max_length=512,
                         seed=0, tokenizer=kind)
"""


def _hashes(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file()}


def test_every_tiny_build_is_byte_identical_across_processes(tmp_path):
    builds = []
    for run in ("a", "b"):
        out = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path / run)], capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        builds.append(_hashes(tmp_path / run))
    assert {k.split("/")[0] for k in builds[0]} == {"splade0", "splade1", "splade2", "bpe", "metaspace", "word"}
    assert builds[0] == builds[1], {k for k in builds[0] if builds[0][k] != builds[1].get(k)}
    copies = [{k.split("/", 1)[1]: v for k, v in builds[0].items() if k.startswith(f"splade{c}/")} for c in range(3)]
    assert len(copies[0]) >= 4 and copies[0] == copies[1] == copies[2]
