"""The tables, figures and report data files one report rule writes, each by its builder in posbias.paper's
registries, from the rule's inputs (read by kind, posbias.paper.inputs) and its config params."""

from pathlib import Path

from posbias import paper
from posbias.jobs import logged
from posbias.paper import inputs

OUTPUTS = ("tables", "figures", "frames")  # params naming what the job writes; the other params are inputs

sm = snakemake  # noqa: F821
with logged(sm, sm.rule) as log:
    given = inputs.read(sm.input.items()) | {k: v for k, v in sm.params.items() if k not in (*OUTPUTS, "provenance")}
    written = paper.produce(*({name: sm.output[key] for name, key in sm.params[o].items()} for o in OUTPUTS),
                            dict(sm.wildcards.items()), **given)
    for path in written:
        log.info("wrote %s", path)
    for path in written:
        if path.endswith(".md"):
            log.info("\n%s", Path(path).read_text())
