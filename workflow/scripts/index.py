"""Build the first-stage index of one (dataset, retriever): Lucene BM25, faiss dense or SPLADE impact."""

from pathlib import Path

from posbias import hub, schemas
from posbias.jobs import logged
from posbias.retrieval import dense, lucene, splade

sm = snakemake  # noqa: F821
spec, out = sm.params.spec, Path(sm.output[0])
with logged(sm, "index") as log:
    corpus = schemas.read(sm.input.corpus, "corpus")
    hub.require(sm.params.model, f"retrievers.{sm.wildcards.retriever}.model")
    if spec["kind"] == "bm25":
        lucene.build_bm25_index(corpus, out, sm.threads)
    elif spec["kind"] == "dense":
        dense.build_index(corpus, out, sm.params.model, spec["pooling"], spec["l2_norm"], spec["batch_size"],
                          spec["max_length"], sm.params.device)
    else:
        splade.build_index(corpus, out, sm.params.model, spec["batch_size"], spec["max_length"], sm.params.device,
                           sm.threads)
    log.info("indexed %d docs with %s", corpus.height, spec["kind"])
