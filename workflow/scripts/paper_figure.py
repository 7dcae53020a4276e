"""One paper figure (posbias.paper.FIGURES) from the reranking metrics and position curves, as PNG and PDF."""

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

SCHEMAS = {"metrics": "rerank_metrics", "curves": "position_curve"}

sm = snakemake  # noqa: F821
with logged(sm, "paper_figure") as log:
    inputs = {key: pl.concat([schemas.read(p, SCHEMAS[key]) for p in sm.input[key]]) for key in SCHEMAS
              if key in sm.input.keys()}
    paper.draw(sm.wildcards.figure, sm.output.png, training=sm.params.training, **inputs)
    log.info("wrote %s and %s", sm.output.png, sm.output.pdf)
