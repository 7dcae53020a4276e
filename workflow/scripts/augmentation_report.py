"""Where the teacher's best passages sit in the input before and after augmentation: table and figure."""

from posbias import paper, schemas
from posbias.augment import position_rank_table
from posbias.jobs import logged
from posbias.paper.augmentation import augmentation_figure, augmentation_table

sm = snakemake  # noqa: F821
variants = ["noaug", "randaug", "posaug"]
with logged(sm, "augmentation_report"):
    tables = {v: position_rank_table(schemas.read(p, "listwise")) for v, p in zip(variants, sm.input)}
    title = f"Augmentation of {sm.wildcards.dataset}: input position of the teacher's best passage"
    paper.write(augmentation_table(tables), sm.output.table[: -len(".md")], title)
    augmentation_figure(tables, sm.output.figure)
