"""OC-SFT's consumers beyond passage reranking: decisions and their flips (Markdown, CSV, LaTeX)."""

from pathlib import Path

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "decisions_table") as log:
    per_query = pl.concat([schemas.read(p, "decisions") for p in sm.input.tables])
    paper.write(paper.decisions_table(per_query, sm.params.variants, sm.params.references),
                sm.output.table[: -len(".md")], paper.CONSUMERS_TITLE)
    log.info("\n%s", Path(sm.output.table).read_text())
