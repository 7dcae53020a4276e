# Stage `evaluation`: ir_measures over every first-stage run; per-query long format and a table.


rule evaluate_run:
    """Per-query metrics of one first-stage run (ir_measures)."""
    input:
        run="results/runs/{dataset}/{retriever}.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        "results/metrics/retrieval/{dataset}/{retriever}.parquet",
    log:
        "logs/metrics/retrieval/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/metrics/retrieval/{dataset}/{retriever}.tsv"
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=20,
    params:
        measures=config["evaluation"]["measures"],
    script:
        "../workflow/scripts/evaluate_run.py"


rule retrieval_table:
    """The first stages' table: every dataset x retriever, mean metrics."""
    input:
        retrieval_summary=[paths.retrieval_metrics(d, r) for d, r in GRID],
    output:
        parquet="results/metrics/retrieval.parquet",
        table=report(
            "results/tables/retrieval.md",
            caption="../docs/captions/retrieval.rst",
            category="First-stage retrieval",
        ),
        csv="results/tables/retrieval.csv",
        tex="results/tables/retrieval.tex",
    log:
        "logs/tables/retrieval.log",
    benchmark:
        "benchmarks/tables/retrieval.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        measures=config["evaluation"]["measures"],
        tables={"retrieval": "table"},
        figures={},
        frames={"retrieval_summary": "parquet"},
    script:
        "../workflow/scripts/report.py"


rule evaluation:
    """Stage target: every first-stage run evaluated, and the retrieval table."""
    input:
        rules.retrieval_table.output,
    localrule: True
