"""The reproduction matrix (posbias.reproduction): the papers' figures beside this run's, as Markdown, CSV and LaTeX."""

from pathlib import Path

from posbias import paper, reproduction, schemas
from posbias.jobs import logged

TITLE = "Reproduction matrix: the papers' figures beside this run"

sm = snakemake  # noqa: F821
with logged(sm, "reproduction") as log:
    rows = reproduction.compute(list(sm.input.expected), sm.params.bindings, schemas.read)
    paper.write(reproduction.table(rows), sm.output.md[: -len(".md")], TITLE)
    log.info("%s\n%s", reproduction.summary(rows), Path(sm.output.md).read_text())
