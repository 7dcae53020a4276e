"""The reranking overview table and the position curves of every experiment and debiasing method."""

from pathlib import Path

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged
from posbias.paper.position_curve import position_curve_figure
from posbias.paper.rerank_overview import rerank_table

sm = snakemake  # noqa: F821
with logged(sm, "rerank_tables") as log:
    summary = pl.concat([schemas.read(p, "rerank_summary") for p in sm.input.summaries])
    curves = pl.concat([schemas.read(p, "position_curve") for p in sm.input.curves])
    table = rerank_table(summary, sm.params.window, sm.params.step)
    paper.write(table, sm.output.table[: -len(".md")], "Listwise reranking under permuted orders")
    # every model its own line (no seed pooling), every debiasing method its own curve
    position_curve_figure(curves, {}, sm.output.figure, debias=None)
    log.info("\n%s", Path(sm.output.table).read_text())
