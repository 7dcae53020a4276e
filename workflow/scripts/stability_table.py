"""The quality-vs-stability table (Markdown, CSV, LaTeX), the BSC@K figure and the pooled-over-bases figure
and table over all pointwise experiments."""

from pathlib import Path

import polars as pl

from posbias import paper, schemas
from posbias.jobs import logged
from posbias.paper.bases import base_cells, bases_figure, bases_table
from posbias.paper.bsc_curve import bsc_figure

sm = snakemake  # noqa: F821
with logged(sm, "stability_table") as log:
    table = pl.concat([schemas.read(p, "stability") for p in sm.input.tables])
    per_query = pl.concat([schemas.read(p, "stability_queries") for p in sm.input.queries])
    seconds = {Path(p).stem: float(pl.read_csv(p, separator="\t")["s"][0]) for p in sm.input.train_benchmarks}
    paper.write(paper.stability(table, per_query, seconds, sm.params.variants, sm.params.reference, sm.params.dev),
                sm.output.table[: -len(".md")], paper.STABILITY_TITLE)
    paper.write(paper.ocsft_settings(table, sm.params.variants, sm.params.settings, sm.params.dev),
                sm.output.settings[: -len(".md")], paper.OCSFT_SETTINGS_TITLE)
    bsc_figure(table, sm.output.figure, sm.params.references)
    cells = base_cells(table, sm.params.base_pairs, sm.params.variants, sm.params.dev)
    bases_figure(cells, sm.output.bases)
    paper.write(bases_table(cells), sm.output.bases_table[: -len(".md")], paper.BASES_TITLE)
    log.info("\n%s", Path(sm.output.table).read_text())
