"""posbias: position-bias research on LLM rerankers, as one declarative workflow.

Results tree (git-ignored; docs/architecture.md has the schemas):
  results/data/{dataset}/{corpus,queries,qrels}.parquet   (+ listwise.parquet for training sets)
  results/models/{model}/                                  tiny builds and trained models
  results/index/{dataset}/{retriever}/                     Lucene / faiss indexes
  results/runs/{dataset}/{retriever}.parquet  (+ .trec)    first-stage runs, canonical and tie-free
  results/metrics/retrieval/{dataset}/{retriever}.parquet  per-query metrics, long format
  results/rerank/{model}/{dataset}/{retriever}/batches/{debias}.{part}/{order}.parquet (+ .trec, .windows, .cost,
      .stats.json): one rerank job's orders; a list-level method's combined run: .../original/{debias}.parquet
  results/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.parquet (+ .curve, .summary)
  results/propensity/{model}/{samples,reranked,omega}.parquet, omega.png
  results/train/{dataset}/{aug}.parquet, results/metrics/train/{model}.parquet
  results/checkpoints/{model}/                             trainer checkpoints; a rerun resumes from the last
  results/silver/{dataset}/{teacher}/t{shuffles}.parquet   OC-SFT silver labels (view 0 + T teacher shuffles)
  results/metrics/stability/{model}/{dataset}/{retriever}.parquet
  results/tables/{name}.{md,csv,tex}                       every table (posbias.paper.write)
  results/figures/{name}.{png,pdf}                         every figure
logs/ and benchmarks/ hold one file per job.

Stage targets: `snakemake data`, `snakemake retrieval`, `snakemake evaluation`, `snakemake reranking`,
`snakemake propensity`, `snakemake training`, `snakemake ocsft`, `snakemake report`; `snakemake plan`
writes the compute plan (results/plan/cost.md) from the data and first-stage runs alone.
"""

import time

from snakemake.utils import min_version

from posbias import provenance
from posbias.jobs import put_on_pythonpath, release_scheduler_timers

min_version("9.0")

# Every job imports the package from this checkout's src/: in the .venv (where it is also installed
# editable) and in the per-rule conda environments (envs/*.yaml, which hold only third-party packages).
put_on_pythonpath(f"{workflow.current_basedir}/src")


configfile: "config/config.yaml"


STARTED = time.time()  # the reproduction summary is printed for a matrix this run wrote
REPRODUCTION_CSV = "results/tables/reproduction.csv"


include: "rules/common.smk"


wildcard_constraints:
    dataset=alternation(DATASETS),


include: "rules/data.smk"
include: "rules/retrieval.smk"
include: "rules/evaluate.smk"
include: "rules/rerank.smk"
include: "rules/propensity.smk"
include: "rules/train.smk"
include: "rules/ocsft.smk"
include: "rules/plan.smk"
include: "rules/report.smk"


rule all:
    """Every stage of the config: tables, figures, the plan and the reproduction matrix."""
    default_target: True
    input:
        rules.evaluation.input,
        rules.data.input,
        rules.reranking.input,
        rules.propensity.input,
        rules.training.input,
        rules.ocsft.input,
        rules.report.input,
    localrule: True


onstart:
    print(
        f"posbias: {provenance.line().removeprefix('Produced by ').split(', rule')[0]}"
        f" (git describe: {provenance.git_state()['git_describe']})",
        file=sys.stderr,
    )


onsuccess:
    release_scheduler_timers()
    # the reproduction matrix's one-line summary, when this run wrote it
    if Path(REPRODUCTION_CSV).exists() and Path(REPRODUCTION_CSV).stat().st_mtime >= STARTED:
        print(f"posbias: {reproduction.summary_of(REPRODUCTION_CSV)}", file=sys.stderr)
    print(f"posbias: done; tables are in {Path('results/tables').resolve()}", file=sys.stderr)


onerror:
    release_scheduler_timers()
