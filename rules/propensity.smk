# Stage `propensity` (DebiasFirst): sample shuffled top-k lists of training queries, rerank them with
# a First model, and estimate omega[input position, output rank].


rule propensity_samples:
    """Shuffled first-stage top-k lists of the training queries, for the propensity estimate."""
    input:
        run=lambda w: paths.run(PROPENSITY["dataset"], PROPENSITY["retriever"]),
    output:
        "results/propensity/{model}/samples.parquet",
    log:
        "logs/propensity/{model}/samples.log",
    benchmark:
        "benchmarks/propensity/{model}/samples.tsv"
    wildcard_constraints:
        model=alternation([PROPENSITY.get("model") or "__none__"]),
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=20,
    params:
        propensity={k: PROPENSITY[k] for k in ("queries", "k", "shuffles")},
        seed=config["seed"],
    script:
        "../workflow/scripts/propensity_samples.py"


rule propensity_rerank:
    """Those lists reranked by the First model whose propensity is estimated."""
    input:
        samples="results/propensity/{model}/samples.parquet",
        queries=lambda w: paths.data(PROPENSITY["dataset"], "queries"),
        corpus=lambda w: paths.data(PROPENSITY["dataset"], "corpus"),
        qrels=lambda w: paths.data(PROPENSITY["dataset"], "qrels"),
        model=lambda w: reranker_model_input(w.model),
    output:
        transitions="results/propensity/{model}/reranked.parquet",
        cost="results/propensity/{model}/reranked.cost.parquet",
    log:
        "logs/propensity/{model}/reranked.log",
    benchmark:
        "benchmarks/propensity/{model}/reranked.tsv"
    wildcard_constraints:
        model=alternation([PROPENSITY.get("model") or "__none__"]),
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=240,
        gpu=model_gpus(PROPENSITY.get("model")),
    params:
        model=lambda w: model_settings(w.model),
        model_path=lambda w: reranker_model_path(w.model),
        k=PROPENSITY["k"],
        word_budget=config["reranking"]["word_budget"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/propensity_rerank.py"


rule propensity_estimate:
    """omega[input position, output rank] from the reranked shuffles, and its heat map."""
    input:
        "results/propensity/{model}/reranked.parquet",
    output:
        omega="results/propensity/{model}/omega.parquet",
        heatmap=report(
            "results/propensity/{model}/omega.png",
            caption="../docs/captions/omega.rst",
            category="Propensity",
        ),
        heatmap_pdf="results/propensity/{model}/omega.pdf",
    log:
        "logs/propensity/{model}/omega.log",
    benchmark:
        "benchmarks/propensity/{model}/omega.tsv"
    wildcard_constraints:
        model=alternation([PROPENSITY.get("model") or "__none__"]),
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        k=PROPENSITY["k"],
        smoothing=PROPENSITY["smoothing"],
    script:
        "../workflow/scripts/propensity_estimate.py"


rule propensity:
    """Stage target: the propensity omega of each configured First model."""
    input:
        [paths.propensity(PROPENSITY["model"], "omega")] if PROPENSITY.get("model") else [],
    localrule: True
