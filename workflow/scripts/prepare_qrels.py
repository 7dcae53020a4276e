"""Read and check the qrels file of a dataset that has one of its own, against its prepared queries and
corpus; write qrels Parquet."""

from posbias import data, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821  (injected by Snakemake)
with logged(sm, "prepare_qrels") as log:
    qrels = data.load_qrels(sm.input.qrels, schemas.read(sm.input.queries, "queries"),
                            schemas.read(sm.input.corpus, "corpus"))
    schemas.write(qrels, sm.output[0], "qrels")
    log.info("%d judgements of %d queries", qrels.height, qrels["query_id"].n_unique())
