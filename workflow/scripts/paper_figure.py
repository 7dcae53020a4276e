"""One paper figure from the reranking metrics and position curves, as PNG and PDF."""

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm.log[0], "paper_figure") as log:
    paper.draw(
        sm.wildcards.figure,
        pl.concat([schemas.read(p, "rerank_metrics") for p in sm.input.metrics]),
        pl.concat([schemas.read(p, "position_curve") for p in sm.input.curves]),
        sm.params.training,
        sm.output.png,
    )
    log.info("wrote %s and %s", sm.output.png, sm.output.pdf)
