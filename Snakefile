"""posbias: position-bias research on LLM rerankers, as one declarative workflow.

Results tree (git-ignored; see docs/architecture.md):
  results/data/{dataset}/{corpus,queries,qrels}.parquet   (+ listwise.parquet for training sets)
  results/models/{model}/                                  tiny models built by the workflow
  results/index/{dataset}/{retriever}/                     Lucene / faiss indexes
  results/runs/{dataset}/{retriever}.parquet  (+ .trec)    first-stage runs, canonical and tie-free
  results/metrics/retrieval/{dataset}/{retriever}.parquet  per-query metrics, long format
  results/metrics/retrieval.parquet, results/tables/retrieval.md
  results/rerank/{model}/{dataset}/{retriever}/{order}/none.parquet (+ .windows.parquet, .stats.json)
  results/metrics/rerank/{model}/{dataset}/{retriever}.parquet (+ .curve.parquet, .summary.parquet)
  results/tables/rerank.md, results/figures/position_curve.png
  results/propensity/{model}/{samples,reranked,omega}.parquet, omega.png
  results/train/{dataset}/{aug}.parquet, results/models/{trained}/, results/metrics/train/{trained}.parquet
  results/checkpoints/{trained}/ (trainer checkpoints; a rerun resumes from the last one)
  results/silver/{dataset}/{teacher}/t{shuffles}.parquet   OC-SFT silver labels (view 0 + T teacher shuffles)
  results/metrics/stability/{model}/{dataset}/{retriever}.parquet, results/tables/stability.md,
  results/figures/bsc_curve.png                            quality vs decision stability, BSC@K
  results/paper/{table}.{md,csv,tex}, {figure}.{png,pdf}    the papers' tables and figures from existing results
logs/ and benchmarks/ hold one file per job.

Stage targets: `snakemake data`, `snakemake retrieval`, `snakemake evaluation`, `snakemake reranking`,
`snakemake propensity`, `snakemake training`, `snakemake ocsft`, `snakemake report`.
"""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


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
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        rules.evaluation.input,
        rules.data.input,
        rules.reranking.input,
        rules.propensity.input,
        rules.training.input,
        rules.ocsft.input,
        rules.report.input,


onsuccess:
    print(f"posbias: done; tables are in {Path('results/tables').resolve()}", file=sys.stderr)
