# Stage `plan`: what the config will cost before it runs (posbias.plan). `snakemake plan` needs only the
# data, the first-stage runs and the tokenizers (tiny builds; HF ids from the local cache, else the real
# tokenizer of the model's family from posbias.standins, else the rule of thumb), and writes per rule family and model the jobs, model loads, windows, model calls, prompt
# tokens and device-hours, and what serving each scorer with K presentations (fixed or adaptive) costs per
# query (results/plan/serving.md). After a run, `plan_check` (part of `report`) puts the plan beside the cost
# files the jobs wrote.

PLAN_COSTS = pbplan.cost_files(config)  # (plan keys, path) of every cost file a run writes
try:  # every file the plan reads; a model reference that does not resolve is its one line, not the DAG's frames
    PLAN_INPUTS = pbplan.inputs(config)
except PosbiasError as exc:
    raise WorkflowError(str(exc)) from None


rule plan:
    """The compute plan: jobs, model loads, calls, prompt tokens and device-hours of every job, counted."""
    input:
        files=PLAN_INPUTS,
        throughput=pbplan.throughput_path(config),
    output:
        orders="results/plan/orders.parquet",
        table=report(
            "results/plan/cost.md",
            caption="../docs/captions/plan.rst",
            category="Compute plan",
        ),
        csv="results/plan/cost.csv",
        tex="results/plan/cost.tex",
        serving=report(
            "results/plan/serving.md",
            caption="../docs/captions/serving.rst",
            category="Compute plan",
        ),
        serving_csv="results/plan/serving.csv",
        serving_tex="results/plan/serving.tex",
    log:
        "logs/plan/plan.log",
    benchmark:
        "benchmarks/plan/plan.tsv"
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=120,
    params:
        settings=pbplan.settings(config),
        serving=pbplan.serving_settings(config),
        provenance=REPORT_LINE,
    script:
        "../workflow/scripts/plan.py"


rule plan_check:
    """The plan beside the run's cost files."""
    input:
        plan="results/plan/orders.parquet",
        reranked=paths.producers([path for _, path in PLAN_COSTS]),
    output:
        table=report(
            "results/tables/plan_check.md",
            caption="../docs/captions/plan_check.rst",
            category="Compute plan",
        ),
        csv="results/tables/plan_check.csv",
        tex="results/tables/plan_check.tex",
    log:
        "logs/plan/check.log",
    benchmark:
        "benchmarks/plan/check.tsv"
    localrule: True
    conda:
        "../envs/models.yaml"  # posbias.plan reaches the model code
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        planned=[keys for keys, _ in PLAN_COSTS],
        costs=[path for _, path in PLAN_COSTS],
        provenance=REPORT_LINE,
        tables={"plan_check": "table"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"
