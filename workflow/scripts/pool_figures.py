"""Pool-PSI and the variance decomposition over every scorer of the pool-replacement design (figures + CSV)."""

import polars as pl

from posbias import schemas
from posbias.jobs import logged
from posbias.paper.pool_figures import pool_figures, pool_summary

sm = snakemake  # noqa: F821
with logged(sm, "pool_figures") as log:
    summary = pool_summary(pl.concat([schemas.read(p, "pool") for p in sm.input]), sm.params.variants,
                           sm.params.reference)
    summary.write_csv(sm.output.table)
    pool_figures(summary, sm.output.psi, sm.output.variance)
    log.info("\n%s", summary)
