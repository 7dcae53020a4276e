# Stage `ocsft`: silver labels for the pointwise "Grades:" scorers and their decision-stability
# evaluation (tau-PSI, retention-set Jaccard, BSC@K) with its table and figure. Training itself is the
# `train` rule (the pointwise methods of posbias.methods).


rule silver_labels:
    """Silver labels for pointwise training: a teacher's grades over shuffled windows (or the qrels)."""
    input:
        run=one_line(lambda w: paths.run(w.dataset, pbconfig.silver_retriever(config, w.dataset))),
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
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=240,
        gpu=lambda w: model_gpus(w.teacher),
    params:
        ocsft={k: config["ocsft"].get(k) for k in ("depth", "queries")},
        window=one_line(lambda w: pbconfig.silver_window(config, w.dataset)),
        model=lambda w: None if w.teacher == "qrels" else model_settings(w.teacher),
        model_path=lambda w: None if w.teacher == "qrels" else reranker_model_path(w.teacher),
        word_budget=lambda w: None if w.teacher == "qrels" else config["reranking"]["word_budget"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/silver_labels.py"


rule stability:
    """Quality and decision stability of one scorer: tau-PSI, retention Jaccard, BSC@K / PermSC@K."""
    input:
        reranked=producers_of(stability_outputs, "parquet", "cost.parquet"),
        plain=lambda w: paths.producers(stability_plain(w)),
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
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=30,
    params:
        orders=lambda w: stability_orders(w),
        runs=lambda w: stability_outputs(w, "parquet"),
        costs=lambda w: stability_outputs(w, "cost.parquet"),
        plain=stability_plain,
        ocsft={k: config["ocsft"][k] for k in ("bsc_k", "grid_points", "presentations", "adaptive")},
        relevant_grade=one_line(lambda w: pbconfig.relevant_grade(config, w.dataset)),
        combine=lambda w: stability_combine(w),
    script:
        "../workflow/scripts/stability.py"


rule decisions:
    """A consumer's decisions (QA answers, response choices) over the presentations, and their flips."""

    # What a consumer decides from one pointwise scorer's scores over M presentations (posbias.consumers).
    input:
        unpack(qa_inputs),
        reranked=producers_of(stability_outputs, "parquet", debias="none"),
        qrels="results/data/{dataset}/qrels.parquet",
        reader=reader_input,
    output:
        table="results/metrics/decisions/{model}/{dataset}/{retriever}.parquet",
        details="results/metrics/decisions/{model}/{dataset}/{retriever}.details.parquet",
    log:
        "logs/metrics/decisions/{model}/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/metrics/decisions/{model}/{dataset}/{retriever}.tsv"
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=120,
        gpu=one_line(
            lambda w: int(
                config["device"].startswith("cuda")
                and pbconfig.needs_reader(config, w.dataset)
                and model_kinds.of(config["readers"][READER]).weights
            )
        ),
    params:
        orders=lambda w: stability_orders(w),
        runs=lambda w: stability_outputs(w, "parquet", "none"),
        consumer=one_line(lambda w: pbconfig.consumer_of(config, w.dataset)),
        ocsft={k: config["ocsft"][k] for k in ("grid_points", "presentations")},
        relevant_grade=one_line(lambda w: pbconfig.relevant_grade(config, w.dataset)),
        reader=one_line(lambda w: reader_settings() if pbconfig.needs_reader(config, w.dataset) else None),
        word_budget=config["reranking"]["word_budget"],
        device=config["device"],
    script:
        "../workflow/scripts/decisions.py"


rule decisions_table:
    """The consumers' table: decisions and flip rates per scorer."""
    input:
        decisions=[paths.decisions(*key) for key in DECISION_TARGETS],
    output:
        table=report(
            "results/tables/consumers.md",
            caption="../docs/captions/consumers.rst",
            category="OC-SFT",
        ),
        csv="results/tables/consumers.csv",
        tex="results/tables/consumers.tex",
    log:
        "logs/tables/consumers.log",
    benchmark:
        "benchmarks/tables/consumers.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in DECISION_TARGETS},
        references=pbconfig.ocsft_variants(config),
        tables={"consumers": "table"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule pool_design:
    """The pool-replacement design: each kept passage scored among rotating companions."""

    # Pool-PSI and the variance decomposition of one pointwise scorer (posbias.pool).
    input:
        run="results/runs/{dataset}/{retriever}.parquet",
        queries="results/data/{dataset}/queries.parquet",
        corpus="results/data/{dataset}/corpus.parquet",
        qrels="results/data/{dataset}/qrels.parquet",
        model=lambda w: reranker_model_input(w.model),
    output:
        table="results/metrics/pool/{model}/{dataset}/{retriever}.parquet",
        cost="results/metrics/pool/{model}/{dataset}/{retriever}.cost.parquet",
    log:
        "logs/metrics/pool/{model}/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/metrics/pool/{model}/{dataset}/{retriever}.tsv"
    conda:
        "../envs/models.yaml"
    resources:
        mem_mb=lambda w, attempt: 8000 * attempt,
        runtime=120,
        gpu=lambda w: model_gpus(w.model),
    params:
        pool={k: v for k, v in config["ocsft"]["pool"].items() if k != "datasets"},
        model=lambda w: model_settings(w.model),
        model_path=lambda w: reranker_model_path(w.model),
        word_budget=config["reranking"]["word_budget"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/pool_design.py"


rule pool_figures:
    """The pool design's figures: order residual per scorer and the variance decomposition."""
    input:
        pool=[paths.pool(*key) for key in POOL_TARGETS],
    output:
        psi=report("results/figures/pool_psi.png", caption="../docs/captions/pool.rst", category="OC-SFT"),
        psi_pdf="results/figures/pool_psi.pdf",
        variance=report(
            "results/figures/variance_decomposition.png",
            caption="../docs/captions/pool.rst",
            category="OC-SFT",
        ),
        variance_pdf="results/figures/variance_decomposition.pdf",
        table="results/tables/pool.csv",
    log:
        "logs/figures/pool.log",
    benchmark:
        "benchmarks/figures/pool.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in POOL_TARGETS},
        reference=config["ocsft"]["pool"]["reference"],
        tables={},
        figures={"pool_psi": "psi", "variance_decomposition": "variance"},
        frames={"pool": "table"},
    script:
        "../workflow/scripts/report.py"


rule stability_table:
    """The OC-SFT tables: quality vs stability, matched retention, bases; BSC@K figure."""
    input:
        stability=[paths.stability(*key, "none") for key in RERANKING_EXPERIMENTS],
        stability_queries=[paths.stability(*key, "none", "queries.parquet") for key in RERANKING_EXPERIMENTS],
        train_seconds=sorted({f"benchmarks/train/{m}.tsv" for m, _, _ in RERANKING_EXPERIMENTS if m in TRAINED}),
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
        matched=report(
            "results/tables/matched_retention.md",
            caption="../docs/captions/matched_retention.rst",
            category="OC-SFT",
        ),
        matched_csv="results/tables/matched_retention.csv",
        matched_tex="results/tables/matched_retention.tex",
    log:
        "logs/tables/stability.log",
    benchmark:
        "benchmarks/tables/stability.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        references=[name for name, run in config["training"].items() if run["method"] == "ocsft"],
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in RERANKING_EXPERIMENTS},
        reference=pbconfig.ocsft_reference(config),
        settings=pbconfig.pointwise_settings(config),
        dev=config["ocsft"]["dev"],
        tables={"stability": "table", "matched_retention": "matched"},
        figures={"bsc_curve": "figure"},
        frames={},
    script:
        "../workflow/scripts/report.py"


# OC-SFT over base models, from the stability table's first input: a job of its own, planned where OC-SFT and
# single order trained from one base are both scored outside the dev set (BASE_PAIRS)
use rule stability_table as bases_pooled_table with:
    input:
        stability=[paths.stability(*key, "none") for key in RERANKING_EXPERIMENTS],
    output:
        bases=report(
            "results/figures/bases_pooled.png",
            caption="../docs/captions/bases_pooled.rst",
            category="OC-SFT",
        ),
        bases_pdf="results/figures/bases_pooled.pdf",
        bases_table="results/tables/bases_pooled.md",
        bases_csv="results/tables/bases_pooled.csv",
        bases_tex="results/tables/bases_pooled.tex",
    log:
        "logs/tables/bases_pooled.log",
    benchmark:
        "benchmarks/tables/bases_pooled.tsv"
    localrule: True
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in RERANKING_EXPERIMENTS},
        dev=config["ocsft"]["dev"],
        base_pairs=BASE_PAIRS,
        tables={"bases_pooled": "bases_table"},
        figures={"bases_pooled": "bases"},
        frames={},


# OC-SFT's settings side by side, from the stability table's inputs: a job of its own, planned where some trained
# pointwise variant is scored outside the dev set (OCSFT_SETTINGS)
use rule stability_table as ocsft_settings_table with:
    input:
        stability=[paths.stability(*key, "none") for key in RERANKING_EXPERIMENTS],
    output:
        settings=report(
            "results/tables/ocsft_settings.md",
            caption="../docs/captions/ocsft_settings.rst",
            category="OC-SFT",
        ),
        settings_csv="results/tables/ocsft_settings.csv",
        settings_tex="results/tables/ocsft_settings.tex",
    log:
        "logs/tables/ocsft_settings.log",
    benchmark:
        "benchmarks/tables/ocsft_settings.tsv"
    localrule: True
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in RERANKING_EXPERIMENTS},
        settings=pbconfig.pointwise_settings(config),
        dev=config["ocsft"]["dev"],
        tables={"ocsft_settings": "settings"},
        figures={},
        frames={},


rule teachers_table:
    """OC-SFT's teachers compared (its Figures 9 and 11): written where students of one method learn from two teachers."""
    input:
        stability=[paths.stability(*key, "none") for key in RERANKING_EXPERIMENTS],
        silver_stats=sorted(
            {paths.silver(s["data"], s["teacher"], config["ocsft"]["shuffles"], "stats.json") for s in TEACHER_STUDY}
        ),
    output:
        teachers=report(
            "results/tables/teachers.md",
            caption="../docs/captions/teachers.rst",
            category="OC-SFT",
        ),
        teachers_csv="results/tables/teachers.csv",
        teachers_tex="results/tables/teachers.tex",
        teachers_figure=report(
            "results/figures/teachers.png",
            caption="../docs/captions/teachers.rst",
            category="OC-SFT",
        ),
        teachers_pdf="results/figures/teachers.pdf",
    log:
        "logs/tables/teachers.log",
    benchmark:
        "benchmarks/tables/teachers.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in RERANKING_EXPERIMENTS},
        dev=config["ocsft"]["dev"],
        teacher_study=TEACHER_STUDY,
        tables={"teachers": "teachers"},
        figures={"teachers": "teachers_figure"},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule label_budget_table:
    """OC-SFT's label budget (its Figure 7): written where a pointwise run sets training.<name>.max_queries."""
    input:
        stability=[paths.stability(*key, "none") for key in RERANKING_EXPERIMENTS],
        silver_stats=sorted({paths.silver(s["data"], s["teacher"], s["shuffles"], "stats.json") for s in LABEL_BUDGET}),
    output:
        label_budget=report(
            "results/tables/label_budget.md",
            caption="../docs/captions/label_budget.rst",
            category="OC-SFT",
        ),
        label_budget_csv="results/tables/label_budget.csv",
        label_budget_tex="results/tables/label_budget.tex",
        label_budget_figure=report(
            "results/figures/label_budget.png",
            caption="../docs/captions/label_budget.rst",
            category="OC-SFT",
        ),
        label_budget_pdf="results/figures/label_budget.pdf",
    log:
        "logs/tables/label_budget.log",
    benchmark:
        "benchmarks/tables/label_budget.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={m: pbconfig.variant_of(config["training"], m) for m, _, _ in RERANKING_EXPERIMENTS},
        dev=config["ocsft"]["dev"],
        label_budget=LABEL_BUDGET,
        tables={"label_budget": "label_budget"},
        figures={"label_budget": "label_budget_figure"},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule frontier:
    """Every scorer and method on one stability x cost frontier, and adaptive budgets against fixed K."""
    input:
        stability_queries=[paths.stability(*target, "queries.parquet") for target in STABILITY_TARGETS],
        stability=[paths.stability(*target) for target in STABILITY_TARGETS],
        decisions=[paths.decisions(*target) for target in DECISION_TARGETS],
    output:
        table=report(
            "results/tables/frontier.md",
            caption="../docs/captions/frontier.rst",
            category="Frontier",
        ),
        csv="results/tables/frontier.csv",
        tex="results/tables/frontier.tex",
        figure=report(
            "results/figures/frontier.png",
            caption="../docs/captions/frontier.rst",
            category="Frontier",
        ),
        figure_pdf="results/figures/frontier.pdf",
    log:
        "logs/tables/frontier.log",
    benchmark:
        "benchmarks/tables/frontier.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={target[0]: pbconfig.variant_of(config["training"], target[0]) for target in STABILITY_TARGETS},
        references=config["frontier"]["references"],
        settings=pbconfig.pointwise_settings(config),
        tables={"frontier": "table"},
        figures={"frontier": "figure"},
        frames={},
    script:
        "../workflow/scripts/report.py"


# Adaptive budgets against fixed K, from the frontier's inputs: a job of its own, planned where some stability
# row is an adaptive budget (ADAPTIVE_BUDGETS)
use rule frontier as adaptive_savings with:
    output:
        savings=report(
            "results/tables/adaptive_savings.md",
            caption="../docs/captions/adaptive_savings.rst",
            category="Frontier",
        ),
        savings_csv="results/tables/adaptive_savings.csv",
        savings_tex="results/tables/adaptive_savings.tex",
    log:
        "logs/tables/adaptive_savings.log",
    benchmark:
        "benchmarks/tables/adaptive_savings.tsv"
    localrule: True
    params:
        provenance=REPORT_LINE,
        variants={target[0]: pbconfig.variant_of(config["training"], target[0]) for target in STABILITY_TARGETS},
        tables={"adaptive_savings": "savings"},
        figures={},
        frames={},


rule serving_width_table:
    """One checkpoint served at several window widths B: written where the config serves one so."""
    input:
        stability=sorted({paths.stability(w["model"], w["dataset"], w["retriever"], "none") for w in SERVED_WIDTHS}),
    output:
        widths=report(
            "results/tables/serving_width.md",
            caption="../docs/captions/serving_width.rst",
            category="OC-SFT",
        ),
        widths_csv="results/tables/serving_width.csv",
        widths_tex="results/tables/serving_width.tex",
    log:
        "logs/tables/serving_width.log",
    benchmark:
        "benchmarks/tables/serving_width.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        widths=SERVED_WIDTHS,
        tables={"serving_width": "widths"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule channels_table:
    """Presentation channels beyond order (markers, skeleton): written where an experiment probes one."""
    input:
        stability_queries=[paths.stability(*target, "queries.parquet") for target in STABILITY_TARGETS],
        stability=[paths.stability(*target) for target in STABILITY_TARGETS],
    output:
        channels=report(
            "results/tables/channels.md",
            caption="../docs/captions/channels.rst",
            category="OC-SFT",
        ),
        channels_csv="results/tables/channels.csv",
        channels_tex="results/tables/channels.tex",
    log:
        "logs/tables/channels.log",
    benchmark:
        "benchmarks/tables/channels.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        variants={target[0]: pbconfig.variant_of(config["training"], target[0]) for target in STABILITY_TARGETS},
        references=config["frontier"]["references"],
        tables={"channels": "channels"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule ocsft:
    """Stage target: the OC-SFT branch (silver labels, training, stability, consumers, pool design)."""
    input:
        rules.stability_table.output if RERANKING_EXPERIMENTS else [],
        rules.decisions_table.output if DECISION_TARGETS else [],
        rules.pool_figures.output if POOL_TARGETS else [],
        rules.frontier.output if STABILITY_TARGETS else [],
        rules.teachers_table.output if TEACHER_STUDY else [],
        rules.label_budget_table.output if LABEL_BUDGET else [],
        rules.channels_table.output if CHANNEL_PROBES else [],
        rules.serving_width_table.output if SERVED_WIDTHS else [],
    localrule: True
