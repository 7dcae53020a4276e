"""The gold answers of one multi-document QA dataset (posbias.data.answers)."""

from posbias import schemas
from posbias.data import answers
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "answers") as log:
    table = answers.load(sm.wildcards.dataset, sm.params.spec, schemas.read(sm.input.corpus, "corpus"),
                         schemas.read(sm.input.qrels, "qrels"), sm.params.irds_home)
    schemas.write(table, sm.output[0], "answers")
    log.info("%d queries with gold answers", table.height)
