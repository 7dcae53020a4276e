# Stage `retrieval`: first-stage runs per dataset x retriever (a kind of posbias.retrieval.kinds, or
# imported:<name>).


rule build_tiny_model:
    """A tiny random-initialised model with a tokenizer trained on a dataset's corpus (CPU demo, tests)."""
    input:
        corpus=lambda w: paths.data(config["models"][w.model]["tiny"].get("train_on", DATASETS[0]), "corpus"),
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
        tiny=one_line(lambda w: pbconfig.sorted_keys(config["models"][w.model]["tiny"])),
        kind=lambda w: config["models"][w.model]["kind"],
        seed=config["seed"],
    script:
        "../workflow/scripts/build_tiny_model.py"


rule convert_gguf:
    """A GGUF checkpoint (models.<name>.gguf) converted once into an HF folder in the entry's dtype."""
    input:
        gguf=lambda w: [ancient(p) for p in GGUF_FILES[w.model]],
    output:
        directory("results/models/{model}"),
    log:
        "logs/models/{model}.log",
    benchmark:
        "benchmarks/models/{model}.tsv"
    wildcard_constraints:
        model=alternation(list(GGUF_FILES) or ["__none__"]),
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=30,
    params:
        gguf=one_line(lambda w: pbconfig.sorted_keys(config["models"][w.model]["gguf"])),
        dtype=lambda w: config["models"][w.model]["dtype"],
        version=lambda w: gguf_source_version(config["models"][w.model]["gguf"]),
    script:
        "../workflow/scripts/convert_gguf.py"


rule index:
    """A first-stage index of one dataset (Lucene BM25, dense FAISS, SPLADE impact)."""

    # The index of a retriever kind that builds one (posbias.retrieval.kinds: bm25, dense, splade).
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
        retriever=alternation(retrievers_of(indexed=True)),
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
        device=retriever_device,
    script:
        "../workflow/scripts/index.py"


rule retrieve:
    """A first-stage run of one dataset x retriever (every kind: bm25, dense, splade, rrf, oracle, listed)."""

    # Every configured retriever's run, as its kind searches (posbias.retrieval.kinds): its index (or a
    # pyserini prebuilt one), or the dataset tables and runs the kind reads (oracle, listed, rrf).
    input:
        unpack(retrieval_inputs),
    output:
        run="results/runs/{dataset}/{retriever}.parquet",
        trec="results/runs/{dataset}/{retriever}.trec",
    log:
        "logs/runs/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/runs/{dataset}/{retriever}.tsv"
    wildcard_constraints:
        retriever=alternation(retrievers_of()),
    conda:
        "../envs/retrieval.yaml"
    threads: retriever_threads
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=120,
        gpu=retriever_gpus,
    params:
        spec=retriever_spec,
        tables=retriever_tables,
        model=lambda w: model_path(w) if "model" in config["retrievers"][w.retriever] else None,
        device=retriever_device,
        prebuilt=one_line(lambda w: pbconfig.prebuilt_index(config, w.dataset, w.retriever)),
        seed=lambda w: config["seed"] if kind_of(w).seeded else None,
    script:
        "../workflow/scripts/retrieve.py"


rule import_run:
    """An imported candidate run (TREC, rank_llm JSON) with its passage texts."""
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
        spec=one_line(
            lambda w: pbconfig.sorted_keys(config["datasets"][w.dataset]["runs"][w.retriever.split(":", 1)[1]])
        ),
    script:
        "../workflow/scripts/import_run.py"


rule retrieval:
    """Stage target: every first-stage run."""
    input:
        [paths.run(d, r) for d, r in GRID],
    localrule: True
