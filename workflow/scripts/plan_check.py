"""The compute plan beside the run: planned and actual calls, tokens and seconds per job order."""

from pathlib import Path

import polars as pl

from posbias import plan
from posbias.jobs import logged
from posbias.paper.writers import write

sm = snakemake  # noqa: F821
with logged(sm, "plan_check") as log:
    planned = pl.read_parquet(sm.input.plan)
    checked = plan.versus_run(planned, plan.actual(list(zip(sm.params.planned, sm.input.costs))))
    write(plan.check_table(checked), Path(sm.output.table).with_suffix(""), "Compute plan against the run")
    log.info("\n%s", Path(sm.output.table).read_text())
