# Stage `report`: the papers' tables (Markdown, CSV, LaTeX) and figures (PNG, PDF) rebuilt from the
# existing results; nothing here retrains or reranks. `snakemake --report results/report.html`
# gathers them with their captions.

PAPER_TABLES = paper.names(paper.TABLES, "paper_table")
PAPER_FIGURES = paper.names(paper.FIGURES, "paper_figure")
# those the config gives rows to (posbias.paper.scope): the only ones the `report` target asks for
FILLED_TABLES = paper.filled(paper.TABLES, "paper_table", config)
FILLED_FIGURES = paper.filled(paper.FIGURES, "paper_figure", config)


rule paper_table:
    """One registered paper table (Markdown, CSV, LaTeX), rebuilt from existing results."""
    input:
        unpack(lambda w: paper_inputs(paper.TABLES, w.table)),
    output:
        md=report(
            "results/tables/{table}.md",
            caption="../docs/captions/paper_table.rst",
            category="Paper tables",
            subcategory="{table}",
        ),
        csv="results/tables/{table}.csv",
        tex="results/tables/{table}.tex",
    log:
        "logs/paper/{table}.log",
    benchmark:
        "benchmarks/paper/{table}.tsv"
    wildcard_constraints:
        table=alternation(PAPER_TABLES),
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        training=pbconfig.training_labels(config),
        reference=config["evaluation"]["reference"],
        tables=lambda w: {w.table: "md"},
        figures={},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule paper_figure:
    """One registered paper figure (PNG, PDF), rebuilt from existing results."""
    input:
        unpack(lambda w: paper_inputs(paper.FIGURES, w.figure)),
    output:
        png=report(
            "results/figures/{figure}.png",
            caption="../docs/captions/paper_figure.rst",
            category="Paper figures",
            subcategory="{figure}",
        ),
        pdf="results/figures/{figure}.pdf",
    log:
        "logs/paper/{figure}.log",
    benchmark:
        "benchmarks/paper/{figure}.tsv"
    wildcard_constraints:
        figure=alternation(PAPER_FIGURES),
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        training=pbconfig.training_labels(config),
        tables={},
        figures=lambda w: {w.figure: "png"},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule report:
    """Stage target: every paper table and figure, the stability tables and the reproduction matrix."""
    input:
        expand("results/tables/{table}.{ext}", table=FILLED_TABLES, ext=["md", "csv", "tex"]) if SUMMARIES else [],
        expand("results/figures/{figure}.{ext}", figure=FILLED_FIGURES, ext=["png", "pdf"]) if SUMMARIES else [],
        # the OC-SFT paper's table and BSC@K figure (rule stability_table, rules/ocsft.smk)
        rules.stability_table.output if RERANKING_EXPERIMENTS else [],
        rules.decisions_table.output if DECISION_TARGETS else [],
        rules.pool_figures.output if POOL_TARGETS else [],
        # every method on one stability × cost frontier (rule frontier)
        rules.frontier.output if STABILITY_TARGETS else [],
        rules.adaptive_savings.output if ADAPTIVE_BUDGETS else [],
        rules.ocsft_settings_table.output if OCSFT_SETTINGS else [],
        rules.bases_pooled_table.output if BASE_PAIRS else [],
        rules.teachers_table.output if TEACHER_STUDY else [],
        rules.label_budget_table.output if LABEL_BUDGET else [],
        rules.channels_table.output if CHANNEL_PROBES else [],
        rules.serving_width_table.output if SERVED_WIDTHS else [],
        # the compute plan beside the run (rules/plan.smk)
        rules.plan_check.output,
        # the papers' figures beside the run (rule reproduction, below)
        "results/tables/reproduction.md",
    localrule: True


# The reproduction matrix: every figure of config/reproduction/ bound to this run's results at DAG time
# (posbias.reproduction.plan), so the rule reads exactly the result files its figures need.
try:
    REPRODUCTION = reproduction.plan(config)
except (ValueError, PosbiasError) as exc:  # a reproduction file's one line, not the DAG's traceback
    raise WorkflowError(str(exc)) from None
# The papers' directional claims (posbias.reproduction.claims): every experiment's per-query metrics
CLAIM_FILES = claims.experiments_of(SUMMARIES)


rule reproduction:
    """The papers' figures beside this run (the matrix) and their directional claims on every model it reranks."""
    input:
        expected=REPRODUCTION.expected,
        identities=REPRODUCTION.identities,
        results=REPRODUCTION.files,
        claims=[f for files in CLAIM_FILES.values() for f in files.values()],
    output:
        md=report(
            "results/tables/reproduction.md",
            caption="../docs/captions/reproduction.rst",
            category="Reproduction",
        ),
        csv="results/tables/reproduction.csv",
        tex="results/tables/reproduction.tex",
        claims_csv="results/tables/claims.csv",
        claims_tex="results/tables/claims.tex",
    log:
        "logs/tables/reproduction.log",
    benchmark:
        "benchmarks/tables/reproduction.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        bindings=REPRODUCTION.bindings,
        claims=lambda w: {"|".join(key): files for key, files in CLAIM_FILES.items()},
    script:
        "../workflow/scripts/reproduction.py"
