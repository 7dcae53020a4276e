"""The reproduction matrix (posbias.reproduction): the papers' figures beside this run's, then their directional
claims on every model the run reranks (posbias.reproduction.claims), as Markdown, CSV and LaTeX."""

from pathlib import Path

from posbias import paper, reproduction, schemas
from posbias.atomic import write_text
from posbias.jobs import logged
from posbias.reproduction import claims

TITLE = "Reproduction matrix: the papers' figures beside this run"
CLAIMS_TITLE = "The papers' directional claims on this run's models"

sm = snakemake  # noqa: F821
with logged(sm, "reproduction") as log:
    rows = reproduction.compute(list(sm.input.expected), sm.params.bindings, schemas.read)
    experiments = {tuple(key.split("|")): {method: schemas.read(path, "rerank_metrics") for method, path in files.items()}
                   for key, files in sm.params.claims.items()}
    checked = claims.evaluate(experiments)
    stem = sm.output.md[: -len(".md")]
    paper.write(reproduction.table(rows), stem, TITLE)
    claims_md = paper.write(claims.table(checked), sm.output.claims_csv[: -len(".csv")], CLAIMS_TITLE)[0]
    second = claims_md.read_text().replace(f"# {CLAIMS_TITLE}", f"## {CLAIMS_TITLE}", 1)
    write_text(sm.output.md, Path(sm.output.md).read_text() + "\n" + second)  # the matrix's second section
    claims_md.unlink()  # its text is that section
    log.info("%s; %s\n%s", reproduction.summary(rows), claims.table(checked).notes.split(" (")[0],
             Path(sm.output.md).read_text())
