# Stage `ocsft`: silver labels for the pointwise "Grades:" scorers and their decision-stability
# evaluation (tau-PSI, retention-set Jaccard, BSC@K) with its table and figure. Training itself is the
# `train` rule (the pointwise methods of posbias.methods).


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
        table="results/metrics/stability/{model}/{dataset}/{retriever}/{debias}.parquet",
        queries="results/metrics/stability/{model}/{dataset}/{retriever}/{debias}.queries.parquet",
    log:
        "logs/metrics/stability/{model}/{dataset}/{retriever}/{debias}.log",
    benchmark:
        "benchmarks/metrics/stability/{model}/{dataset}/{retriever}/{debias}.tsv"
    wildcard_constraints:
        debias=WINDOW_DEBIAS_PATTERN,
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        orders=lambda w: stability_orders(w),
        ocsft={k: config["ocsft"][k] for k in ("bsc_k", "grid_points", "presentations")},
        relevant_grade=config["reranking"]["relevant_grade"],
        combine=lambda w: stability_combine(w),
    script:
        "../workflow/scripts/stability.py"


rule stability_table:
    input:
        tables=[stability_file((*key, "none")) for key in POINTWISE_EXPERIMENTS],
        queries=[stability_file((*key, "none"), "queries.parquet") for key in POINTWISE_EXPERIMENTS],
        train_benchmarks=sorted({f"benchmarks/train/{m}.tsv" for m, _, _ in POINTWISE_EXPERIMENTS if m in TRAINED}),
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
        settings=report(
            "results/tables/ocsft_settings.md",
            caption="../docs/captions/ocsft_settings.rst",
            category="OC-SFT",
        ),
        settings_csv="results/tables/ocsft_settings.csv",
        settings_tex="results/tables/ocsft_settings.tex",
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
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in POINTWISE_EXPERIMENTS},
        reference=pbconfig.ocsft_reference(config),
        settings=pbconfig.pointwise_settings(config),
        dev=config["ocsft"]["dev"],
    script:
        "../workflow/scripts/stability_table.py"


rule stability_all:
    input:
        queries=[stability_file(target, "queries.parquet") for target in STABILITY_TARGETS],
    output:
        table=report(
            "results/tables/stability_all.md",
            caption="../docs/captions/stability_all.rst",
            category="OC-SFT",
        ),
        csv="results/tables/stability_all.csv",
        tex="results/tables/stability_all.tex",
    log:
        "logs/tables/stability_all.log",
    benchmark:
        "benchmarks/tables/stability_all.tsv"
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={target[0]: pbconfig.variant_of(config["training"], target[0]) for target in STABILITY_TARGETS},
    script:
        "../workflow/scripts/stability_all.py"


rule ocsft:
    input:
        rules.stability_table.output if POINTWISE_EXPERIMENTS else [],
        rules.stability_all.output if STABILITY_TARGETS else [],
