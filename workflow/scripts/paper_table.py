"""One paper table (posbias.paper.TABLES) from the reranking and retrieval metrics, as Markdown, CSV and LaTeX."""

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

SCHEMAS = {"metrics": "rerank_metrics", "summaries": "rerank_summary", "curves": "position_curve",
           "first_stage": "metrics"}

sm = snakemake  # noqa: F821
with logged(sm, "paper_table") as log:
    name = sm.wildcards.table
    inputs = {key: pl.concat([schemas.read(p, SCHEMAS[key]) for p in sm.input[key]]) for key in SCHEMAS
              if key in sm.input.keys()}
    table = paper.build(name, training=sm.params.training, reference=sm.params.reference, **inputs)
    paper.write(table, sm.output.md[: -len(".md")], paper.TABLES[name].title)
    log.info("\n%s", open(sm.output.md).read())
