# Stage `retrieval`: first-stage runs per dataset x retriever (bm25, dense, splade, rrf, oracle, listed,
# imported:<name>).


rule build_tiny_model:
    # A tiny random-initialised model with a tokenizer trained on a dataset's corpus (CPU demo, tests).
    input:
        corpus=lambda w: "results/data/{}/corpus.parquet".format(
            config["models"][w.model]["tiny"].get("train_on", DATASETS[0])
        ),
    output:
        directory("results/models/{model}"),
    log:
        "logs/models/{model}.log",
    benchmark:
        "benchmarks/models/{model}.tsv"
    wildcard_constraints:
        model=alternation([m for m, s in config["models"].items() if s.get("build")] or ["__none__"]),
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        tiny=lambda w: pbconfig.canonical(config["models"][w.model]["tiny"]),
        kind=lambda w: config["models"][w.model]["kind"],
        seed=config["seed"],
    script:
        "../workflow/scripts/build_tiny_model.py"


rule index:
    input:
        corpus="results/data/{dataset}/corpus.parquet",
        model=model_input,
    output:
        directory("results/index/{dataset}/{retriever}"),
    log:
        "logs/index/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/index/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of("bm25", "dense", "splade")),
    conda:
        "../envs/retrieval.yaml"
    threads: config["threads"]
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=240,
        gpu=retriever_gpus,
    params:
        spec=retriever_spec,
        model=lambda w: model_path(w) if "model" in config["retrievers"][w.retriever] else None,
        device=config["device"],
    script:
        "../workflow/scripts/index.py"


rule retrieve:
    input:
        index=lambda w: (
            []
            if pbconfig.prebuilt_index(config, w.dataset, w.retriever)
            else f"results/index/{w.dataset}/{w.retriever}"
        ),
        queries="results/data/{dataset}/queries.parquet",
        model=model_input,
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of("bm25", "dense", "splade")),
    conda:
        "../envs/retrieval.yaml"
    threads: config["threads"]
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=120,
        gpu=retriever_gpus,
    params:
        spec=retriever_spec,
        model=lambda w: model_path(w) if "model" in config["retrievers"][w.retriever] else None,
        device=config["device"],
        prebuilt=lambda w: pbconfig.prebuilt_index(config, w.dataset, w.retriever),
    script:
        "../workflow/scripts/retrieve.py"


rule retrieve_oracle:
    # A simulated first stage of known quality: qrels grade + seeded noise (posbias.retrieval.oracle).
    input:
        queries="results/data/{dataset}/queries.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of("oracle")),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        spec=retriever_spec,
        seed=config["seed"],
    script:
        "../workflow/scripts/retrieve_oracle.py"


rule retrieve_listed:
    # The candidates a dataset lists with each query, in its order (posbias.retrieval.listed).
    input:
        corpus="results/data/{dataset}/corpus.parquet",
        queries="results/data/{dataset}/queries.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of("listed")),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        spec=retriever_spec,
    script:
        "../workflow/scripts/retrieve_listed.py"


rule import_run:
    input:
        # The data stage checked that every doc of the run has a passage text.
        corpus="results/data/{dataset}/corpus.parquet",
        run=lambda w: config["datasets"][w.dataset]["runs"][w.retriever.split(":", 1)[1]]["path"],
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever="imported:[^/]+",
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        spec=lambda w: pbconfig.canonical(config["datasets"][w.dataset]["runs"][w.retriever.split(":", 1)[1]]),
    script:
        "../workflow/scripts/import_run.py"


rule fuse_rrf:
    input:
        runs=lambda w: expand(
            "results/runs/{dataset}/{part}.parquet", dataset=w.dataset, part=config["retrievers"][w.retriever]["runs"]
        ),
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of("rrf")),
    conda:
        "../envs/retrieval.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        spec=retriever_spec,
    script:
        "../workflow/scripts/fuse_rrf.py"


rule retrieval:
    input:
        [f"results/runs/{d}/{r}.parquet" for d, r in GRID],
