"""Write the listwise training instances (candidates + teacher ranking) of a dataset."""

from posbias import data, schemas
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "listwise_set") as log:
    coll = data.load(sm.wildcards.dataset, sm.params.spec, sm.params.seed, sm.params.irds_home)
    schemas.write(coll.listwise, sm.output[0], "listwise")
    log.info("%d listwise instances", coll.listwise.height)
