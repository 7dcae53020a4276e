"""Listwise and pointwise rerankers on the same stability metrics over the same queries (Markdown, CSV, LaTeX)."""

from pathlib import Path

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "stability_all") as log:
    per_query = pl.concat([schemas.read(p, "stability_queries") for p in sm.input.queries])
    paper.write(paper.stability_all(per_query, sm.params.variants), sm.output.table[: -len(".md")],
                paper.STABILITY_ALL_TITLE)
    log.info("\n%s", Path(sm.output.table).read_text())
