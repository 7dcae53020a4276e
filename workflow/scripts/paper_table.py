"""One paper table from the reranking and retrieval metrics, as Markdown, CSV and LaTeX."""

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm.log[0], "paper_table") as log:
    name = sm.wildcards.table
    table = paper.build(
        name,
        pl.concat([schemas.read(p, "rerank_metrics") for p in sm.input.metrics]),
        pl.concat([schemas.read(p, "rerank_summary") for p in sm.input.summaries]),
        pl.concat([schemas.read(p, "position_curve") for p in sm.input.curves]),
        pl.concat([schemas.read(p, "metrics") for p in sm.input.first_stage]),
        sm.params.training,
    )
    paper.write(table, sm.output.md[: -len(".md")], paper.TABLES[name])
    log.info("\n%s", open(sm.output.md).read())
