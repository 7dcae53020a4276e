"""Where the teacher's best passages sit in the input before and after augmentation: table and figure."""

from pathlib import Path

from posbias import report, schemas
from posbias.augment import position_rank_table
from posbias.jobs import logged

sm = snakemake  # noqa: F821
variants = ["noaug", "randaug", "posaug"]
with logged(sm.log[0], "augmentation_report"):
    tables = {v: position_rank_table(schemas.read(p, "listwise")) for v, p in zip(variants, sm.input)}
    Path(sm.output.table).write_text(report.augmentation_table(tables, sm.wildcards.dataset))
    report.augmentation_figure(tables, sm.output.figure)
