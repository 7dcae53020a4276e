"""Load one dataset from its source and write corpus, queries and qrels Parquet."""

from posbias import data, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821  (injected by Snakemake)
with logged(sm, "prepare_dataset") as log:
    coll = data.load(sm.wildcards.dataset, sm.params.spec, sm.params.seed, sm.params.irds_home)
    schemas.write(coll.corpus, sm.output.corpus, "corpus")
    schemas.write(coll.queries, sm.output.queries, "queries")
    schemas.write(coll.qrels, sm.output.qrels, "qrels")
    log.info("%d docs, %d queries, %d qrels", coll.corpus.height, coll.queries.height, coll.qrels.height)
