# Stage `reranking`: listwise reranking of first-stage candidates in every evaluation order, with or
# without inference-time debiasing, and the permuted evaluation (nDCG@10 per order, tau-PSI over
# shuffles, position curve, cost) with its table and figure.
#
# A `rerank` job loads its model once and reranks a batch of orders (config.rerank_batches) into a
# batch folder, one set of files per order (posbias.paths.in_batch); the rules downstream name the
# batch folders as inputs and read their orders' files by the paths in their params (a file inside a
# directory() output is not matched to its rule), so no job copies an order out of its batch.


rule rerank:
    """One model load reranks a batch of orders of one experiment and debias method."""
    input:
        run="results/runs/{dataset}/{retriever}.parquet",
        queries="results/data/{dataset}/queries.parquet",
        corpus="results/data/{dataset}/corpus.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
        model=lambda w: reranker_model_input(w.model),
    output:
        directory("results/rerank/{model}/{dataset}/{retriever}/batches/{debias}.{part}"),
    log:
        "logs/rerank/{model}/{dataset}/{retriever}/{debias}.{part}.log",
    benchmark:
        "benchmarks/rerank/{model}/{dataset}/{retriever}/{debias}.{part}.tsv"
    wildcard_constraints:
        debias=WINDOW_DEBIAS_PATTERN,
        part=r"(list|position)-\d+",
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        # an hour per order, more on a retry; --set-resources rerank:runtime=N overrides
        runtime=lambda w, attempt: 60 * attempt * len(batch_orders(w)),
        gpu=lambda w: model_gpus(w.model),
    params:
        orders=batch_orders,
        settings=one_line(lambda w: pbconfig.rerank_settings(config, w.model, w.dataset, w.retriever, w.debias, w.part)),
        model=lambda w: model_settings(w.model),
        model_path=lambda w: reranker_model_path(w.model),
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/rerank.py"


rule combine_lists:
    """A list-level debias method (e.g. PermSC@K): reranked shuffled lists aggregated into one run."""
    input:
        reranked=producers_of(list_debias_inputs, "parquet"),
    output:
        run="results/rerank/{model}/{dataset}/{retriever}/original/{debias}.parquet",
        trec="results/rerank/{model}/{dataset}/{retriever}/original/{debias}.trec",
        cost="results/rerank/{model}/{dataset}/{retriever}/original/{debias}.cost.parquet",
        stats="results/rerank/{model}/{dataset}/{retriever}/original/{debias}.stats.json",
    log:
        "logs/rerank/{model}/{dataset}/{retriever}/original/{debias}.log",
    benchmark:
        "benchmarks/rerank/{model}/{dataset}/{retriever}/original/{debias}.tsv"
    wildcard_constraints:
        debias=LIST_DEBIAS_PATTERN,
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        runs=lambda w: list_debias_inputs(w, "parquet"),
        costs=lambda w: list_debias_inputs(w, "cost.parquet"),
        stats=lambda w: list_debias_inputs(w, "stats.json"),
        settings=one_line(lambda w: debias.options(config["reranking"], w.debias)),
    script:
        "../workflow/scripts/combine_lists.py"


rule rerank_summary:
    """The permuted evaluation of one experiment: per-query metrics, tau-PSI, position curve, cost."""
    input:
        reranked=producers_of(experiment_outputs, "parquet", "stats.json", "cost.parquet"),
        first_stage="results/runs/{dataset}/{retriever}.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
    output:
        metrics="results/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.parquet",
        curve="results/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.curve.parquet",
        summary="results/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.summary.parquet",
    log:
        "logs/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.log",
    benchmark:
        "benchmarks/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.tsv"
    wildcard_constraints:
        debias=DEBIAS_PATTERN,
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        orders=one_line(lambda w: pbconfig.orders_for(config, EXPERIMENTS[(w.model, w.dataset, w.retriever)], w.debias)),
        runs=lambda w: experiment_outputs(w, "parquet"),
        stats=lambda w: experiment_outputs(w, "stats.json"),
        costs=lambda w: experiment_outputs(w, "cost.parquet"),
        position=one_line(lambda w: pbconfig.position_settings(config, w.model, w.dataset, w.retriever, w.debias)),
        measures=config["evaluation"]["measures"],
        seed=config["seed"],
        # the summary's and the curve's columns: a new one (psi; the curve's interval over queries) reruns these
        # jobs, not the reranking before them
        columns=schemas.RERANK_SUMMARY.names + schemas.POSITION_CURVE.names,
    script:
        "../workflow/scripts/rerank_summary.py"


rule rerank_tables:
    """The rerank table: quality under permuted orders, τ-PSI, position curves' spread and cost per model."""
    input:
        summaries=RERANK_RESULTS["summaries"],
        curves=RERANK_RESULTS["curves"],
    output:
        table=report(
            "results/tables/rerank.md",
            caption="../docs/captions/rerank.rst",
            category="Reranking",
        ),
        csv="results/tables/rerank.csv",
        tex="results/tables/rerank.tex",
    log:
        "logs/tables/rerank.log",
    benchmark:
        "benchmarks/tables/rerank.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        window=config["reranking"]["window"],
        step=config["reranking"]["step"],
        tables={"rerank": "table"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule reranking:
    """Stage target: every reranking experiment, summarised, with its table."""
    input:
        rules.rerank_tables.output if EXPERIMENTS else [],
    localrule: True
