# Stage `report`: the papers' tables (Markdown, CSV, LaTeX) and figures (PNG, PDF) rebuilt from the
# existing results; nothing here retrains or reranks. `snakemake --report results/report.html`
# gathers them with their captions.

PAPER_TABLES = ["original_vs_shuffled", "retrievers", "capcal", "ablations"]


rule paper_table:
    input:
        metrics=[f"results/metrics/rerank/{m}/{d}/{r}/{b}.parquet" for m, d, r, b in SUMMARIES],
        summaries=[f"results/metrics/rerank/{m}/{d}/{r}/{b}.summary.parquet" for m, d, r, b in SUMMARIES],
        curves=[f"results/metrics/rerank/{m}/{d}/{r}/{b}.curve.parquet" for m, d, r, b in SUMMARIES],
        first_stage=sorted({f"results/metrics/retrieval/{d}/{r}.parquet" for _, d, r, _ in SUMMARIES}),
    output:
        md=report(
            "results/paper/{table}.md",
            caption="../docs/captions/paper_table.rst",
            category="Paper tables",
            subcategory="{table}",
        ),
        csv="results/paper/{table}.csv",
        tex="results/paper/{table}.tex",
    params:
        training=config.get("training", {}),
    wildcard_constraints:
        table=alternation(PAPER_TABLES),
    log:
        "logs/paper/{table}.log",
    benchmark:
        "benchmarks/paper/{table}.tsv"
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../workflow/scripts/paper_table.py"


rule report:
    input:
        expand("results/paper/{table}.{ext}", table=PAPER_TABLES, ext=["md", "csv", "tex"]) if SUMMARIES else [],
