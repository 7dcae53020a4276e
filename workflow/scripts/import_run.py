"""Write an imported candidate run (rank_llm JSON or TREC file) as a canonical run."""

from pathlib import Path

from posbias import runs, schemas
from posbias.data.imported import read_rank_llm
from posbias.jobs import logged

sm = snakemake  # noqa: F821
with logged(sm, "import_run") as log:
    spec = sm.params.spec
    path = Path(spec["path"])
    run = read_rank_llm(path)[2] if spec["format"] == "rank_llm" else runs.read_trec(path)
    schemas.write(run, sm.output.run, "run")
    runs.write_trec(run, sm.output.trec, sm.wildcards.retriever)
    log.info("imported %d hits for %d queries from %s", run.height, run["query_id"].n_unique(), path)
