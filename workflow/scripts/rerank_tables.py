"""The reranking table (markdown) and the position-curve figure over all experiments."""

from pathlib import Path

import polars as pl

from posbias import report, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm.log[0], "rerank_tables") as log:
    summary = pl.concat([schemas.read(p, "rerank_summary") for p in sm.input.summaries])
    curves = pl.concat([schemas.read(p, "position_curve") for p in sm.input.curves])
    table = report.rerank_table(summary)
    Path(sm.output.table).write_text(
        "# Listwise reranking under permuted orders\n\n"
        f"Window {sm.params.window}, step {sm.params.step}. Shuffled: mean ± sd over the M shuffle seeds. "
        "τ-PSI: mean over queries of (1 − mean pairwise Kendall τ)/2 across the shuffled orders. Curve: nDCG@10 "
        "of the relevant passage moved to input position p (first, last, max − min).\n\n" + table
    )
    report.position_curve_figure(curves, sm.output.figure)
    log.info("\n%s", table)
