# Stage `data`: every configured dataset as corpus/queries/qrels Parquet (+ listwise training sets).
# A dataset whose qrels are a file of their own (trec, imported, beir; pbconfig.qrels_file) gets them
# from prepare_qrels and its texts from prepare_texts, so editing a grade rewrites only the qrels (no
# re-indexing); the others get all three from prepare_dataset.


rule prepare_dataset:
    """A dataset's corpus, queries and qrels as Parquet, from its source (ir_datasets, BEIR, TREC files, toys)."""
    input:
        dataset_files,
    output:
        corpus="results/data/{dataset}/corpus.parquet",
        queries="results/data/{dataset}/queries.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    log:
        "logs/data/{dataset}.log",
    benchmark:
        "benchmarks/data/{dataset}.tsv"
    wildcard_constraints:
        dataset=alternation(QRELS_WITH_TEXTS or ["__none__"]),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=60,
    params:
        spec=dataset_params,
        seed=config["seed"],
        irds_home=config["ir_datasets_home"],
    script:
        "../workflow/scripts/prepare_dataset.py"


use rule prepare_dataset as prepare_texts with:
    input:
        text_files,
    output:
        corpus="results/data/{dataset}/corpus.parquet",
        queries="results/data/{dataset}/queries.parquet",
    wildcard_constraints:
        dataset=alternation(QRELS_APART or ["__none__"]),
    params:
        spec=dataset_params,
        seed=config["seed"],
        irds_home=config["ir_datasets_home"],
        content=text_digests,


rule prepare_qrels:
    """A dataset's own qrels file as Parquet, apart from its texts (a grade edit reruns only this)."""
    input:
        qrels=qrels_input,
        queries="results/data/{dataset}/queries.parquet",
        corpus="results/data/{dataset}/corpus.parquet",
    output:
        "results/data/{dataset}/qrels.parquet",
    log:
        "logs/data/{dataset}.qrels.log",
    benchmark:
        "benchmarks/data/{dataset}.qrels.tsv"
    wildcard_constraints:
        dataset=alternation(QRELS_APART or ["__none__"]),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        content=qrels_digest,
    script:
        "../workflow/scripts/prepare_qrels.py"


rule listwise_set:
    """A training set's listwise instances (teacher orders or a listwise file) as Parquet."""
    input:
        dataset_files,
    output:
        "results/data/{dataset}/listwise.parquet",
    log:
        "logs/data/{dataset}.listwise.log",
    benchmark:
        "benchmarks/data/{dataset}.listwise.tsv"
    wildcard_constraints:
        dataset=alternation(LISTWISE_DATASETS or ["__none__"]),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        spec=dataset_params,
        seed=config["seed"],
        irds_home=config["ir_datasets_home"],
    script:
        "../workflow/scripts/listwise_set.py"


rule answers:
    """A multi-document QA dataset's gold answers as Parquet."""

    # The gold answers of a multi-document QA dataset (posbias.data.answers).
    input:
        answers=lambda w: (
            [config["datasets"][w.dataset]["answers"]] if "answers" in config["datasets"][w.dataset] else []
        ),
        corpus="results/data/{dataset}/corpus.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        "results/data/{dataset}/answers.parquet",
    log:
        "logs/data/{dataset}.answers.log",
    benchmark:
        "benchmarks/data/{dataset}.answers.tsv"
    wildcard_constraints:
        dataset=alternation(QA_DATASETS or ["__none__"]),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        spec=one_line(
            lambda w: pbconfig.sorted_keys(
                {k: v for k, v in config["datasets"][w.dataset].items() if k in ("source", "id", "answers")}
            )
        ),
        irds_home=config["ir_datasets_home"],
    script:
        "../workflow/scripts/answers.py"


rule data:
    """Stage target: every dataset's Parquet files."""
    input:
        expand("results/data/{dataset}/{part}.parquet", dataset=DATASETS, part=["corpus", "queries", "qrels"]),
        expand("results/data/{dataset}/listwise.parquet", dataset=LISTWISE_DATASETS),
    localrule: True
