"""Same config, same bytes: the tiny models the workflow builds are identical from one process to the next.

Tokenizer training is where run-dependent state crept in (the WordPiece trainer numbers its alphabet in
a hash map's order), so every tiny build runs twice, each in a fresh interpreter (fresh hash seeds),
and the files are compared by hash.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

BUILD = """
import sys
from pathlib import Path
from posbias.data import synthetic
from posbias.models import build_tiny_causal_lm, build_tiny_masked_lm
texts = synthetic.generate(synthetic.SyntheticSpec(seed=42, n_docs=600), "test").corpus["text"].to_list()
out = Path(sys.argv[1])
build_tiny_masked_lm(texts, out / "splade", vocab_size=2000, hidden=16, layers=1, heads=2, max_length=128, seed=0)
for kind in ("bpe", "metaspace", "word"):
    build_tiny_causal_lm(texts, out / kind, vocab_size=600, hidden=16, layers=1, heads=2, max_length=512, seed=0,
                         tokenizer=kind)
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
    assert len(builds[0]) >= 16 and {k.split("/")[0] for k in builds[0]} == {"splade", "bpe", "metaspace", "word"}
    assert builds[0] == builds[1], {k for k in builds[0] if builds[0][k] != builds[1].get(k)}
