"""Build a tiny random-initialised model (masked LM for SPLADE, causal LM for reranking) from a corpus."""

from pathlib import Path

from posbias import schemas
from posbias.data.collection import passage_texts
from posbias.jobs import logged
from posbias.models import build_tiny_causal_lm, build_tiny_masked_lm

sm = snakemake  # noqa: F821
builders = {"masked_lm": build_tiny_masked_lm, "causal_lm": build_tiny_causal_lm}
with logged(sm, "build_tiny_model") as log:
    corpus = schemas.read(sm.input.corpus, "corpus")
    texts = list(passage_texts(corpus).values())
    sizes = {k: v for k, v in sm.params.tiny.items() if k != "train_on"}
    builders[sm.params.kind](texts, Path(sm.output[0]), seed=sm.params.seed, **sizes)
    log.info("built a tiny %s at %s from %d texts", sm.params.kind, sm.output[0], len(texts))
