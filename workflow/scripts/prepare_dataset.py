"""Load one dataset from its source and write corpus, queries and (where they come with the texts) qrels
Parquet; a dataset with a qrels file of its own gets its qrels from rule prepare_qrels."""

from posbias import data, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821  (injected by Snakemake)
with_qrels = "qrels" in sm.output.keys()
with logged(sm, sm.rule) as log:
    coll = data.load(sm.wildcards.dataset, sm.params.spec, sm.params.seed, sm.params.irds_home, qrels=with_qrels)
    schemas.write(coll.corpus, sm.output.corpus, "corpus")
    schemas.write(coll.queries, sm.output.queries, "queries")
    if with_qrels:
        schemas.write(coll.qrels, sm.output.qrels, "qrels")
    log.info("%d docs, %d queries, %d qrels", coll.corpus.height, coll.queries.height, coll.qrels.height)
