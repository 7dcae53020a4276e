"""Augment a listwise training set: noaug, randaug or posaug."""

from posbias import schemas
from posbias.augment import augment
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "augment") as log:
    listwise = schemas.read(sm.input[0], "listwise")
    out = augment(listwise, sm.wildcards.aug, sm.params.n_groups, sm.params.seed)
    schemas.write(out, sm.output[0], "listwise")
    log.info("%s: %d instances -> %d", sm.wildcards.aug, listwise.height, out.height)
