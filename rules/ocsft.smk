# Stage `ocsft`: silver labels for the pointwise "Grades:" scorers and their decision-stability
# evaluation (tau-PSI, retention-set Jaccard, BSC@K) with its table and figure. Training itself is the
# `train` rule (methods ocsft, single_order, order_averaged, perm_aug, debiasfirst_pointwise).


rule silver_labels:
    input:
        run=f"results/runs/{{dataset}}/{config['ocsft']['retriever']}.parquet",
        queries="results/data/{dataset}/queries.parquet",
        corpus="results/data/{dataset}/corpus.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
        model=lambda w: [] if w.teacher == "qrels" else reranker_model_input(w.teacher),
    output:
        labels="results/silver/{dataset}/{teacher}/t{shuffles}.parquet",
        cost="results/silver/{dataset}/{teacher}/t{shuffles}.cost.parquet",
        stats="results/silver/{dataset}/{teacher}/t{shuffles}.stats.json",
    log:
        "logs/silver/{dataset}/{teacher}/t{shuffles}.log",
    benchmark:
        "benchmarks/silver/{dataset}/{teacher}/t{shuffles}.tsv"
    wildcard_constraints:
        shuffles=r"\d+",
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=lambda w: model_gpus(w.teacher),
    params:
        ocsft={k: config["ocsft"].get(k) for k in ("depth", "window", "queries")},
        model=lambda w: None if w.teacher == "qrels" else model_settings(w.teacher),
        model_path=lambda w: None if w.teacher == "qrels" else reranker_model_path(w.teacher),
        word_budget=lambda w: None if w.teacher == "qrels" else config["reranking"]["word_budget"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/silver_labels.py"


rule stability:
    input:
        runs=lambda w: stability_outputs(w, "parquet"),
        costs=lambda w: stability_outputs(w, "cost.parquet"),
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        "results/metrics/stability/{model}/{dataset}/{retriever}.parquet",
    log:
        "logs/metrics/stability/{model}/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/metrics/stability/{model}/{dataset}/{retriever}.tsv"
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        orders=lambda w: stability_orders(w),
        ocsft={k: config["ocsft"][k] for k in ("bsc_k", "grid_points", "presentations")},
        relevant_grade=config["reranking"]["relevant_grade"],
    script:
        "../workflow/scripts/stability.py"


rule stability_table:
    input:
        tables=[f"results/metrics/stability/{m}/{d}/{r}.parquet" for m, d, r in POINTWISE_EXPERIMENTS],
        train_benchmarks=[f"benchmarks/train/{m}.tsv" for m, _, _ in POINTWISE_EXPERIMENTS if m in TRAINED],
    output:
        table=report(
            "results/tables/stability.md",
            caption="../docs/captions/stability.rst",
            category="OC-SFT",
        ),
        csv="results/tables/stability.csv",
        tex="results/tables/stability.tex",
        figure=report(
            "results/figures/bsc_curve.png",
            caption="../docs/captions/stability.rst",
            category="OC-SFT",
        ),
        figure_pdf="results/figures/bsc_curve.pdf",
    log:
        "logs/tables/stability.log",
    benchmark:
        "benchmarks/tables/stability.tsv"
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        references=[name for name, run in config["training"].items() if run["method"] == "ocsft"],
    script:
        "../workflow/scripts/stability_table.py"


rule ocsft:
    input:
        rules.stability_table.output if POINTWISE_EXPERIMENTS else [],
