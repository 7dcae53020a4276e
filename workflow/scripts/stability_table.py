"""The quality-vs-stability table (markdown) and the BSC@K figure over all pointwise experiments."""

from pathlib import Path

import polars as pl

from posbias import report, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm.log[0], "stability_table") as log:
    table = pl.concat([schemas.read(p, "stability") for p in sm.input.tables])
    seconds = {Path(p).stem: float(pl.read_csv(p, separator="\t")["s"][0]) for p in sm.input.train_benchmarks}
    text = report.stability_table(table, seconds)
    Path(sm.output.table).write_text("# Pointwise scorers: quality vs decision stability\n\n" + text)
    report.bsc_figure(table, sm.output.figure)
    log.info("\n%s", text)
