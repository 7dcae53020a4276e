# Stage `train`: augmented listwise training sets (noaug, randaug, posaug) and fine-tuned models:
# First (first, debiasfirst and the ablations rank, rank_ips, rank_ips_lm) and the pointwise Grades
# scorer (ocsft, single_order, order_averaged, perm_aug, debiasfirst_pointwise; silver labels from
# rules/ocsft.smk).


rule augment:
    """A training set's augmented lists: noaug, randaug or posaug (Fisher-Yates, then n groups rotated)."""
    input:
        "results/data/{dataset}/listwise.parquet",
    output:
        "results/train/{dataset}/{aug}.parquet",
    log:
        "logs/train/{dataset}/{aug}.augment.log",
    benchmark:
        "benchmarks/train/{dataset}/{aug}.augment.tsv"
    wildcard_constraints:
        aug=alternation(augment.AUGMENTATIONS),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda w, attempt: 4000 * attempt,
        runtime=20,
    params:
        n_groups=config["augmentation"]["n_groups"],
        seed=config["seed"],
    script:
        "../workflow/scripts/augment.py"


rule augmentation_report:
    """How the augmentations place the relevant passage over input positions."""
    input:
        position_ranks=expand("results/train/{{dataset}}/{aug}.parquet", aug=list(augment.AUGMENTATIONS)),
    output:
        table=report(
            "results/tables/augmentation_{dataset}.md",
            caption="../docs/captions/augmentation.rst",
            category="Augmentation",
        ),
        csv="results/tables/augmentation_{dataset}.csv",
        tex="results/tables/augmentation_{dataset}.tex",
        figure=report(
            "results/figures/augmentation_{dataset}.png",
            caption="../docs/captions/augmentation.rst",
            category="Augmentation",
        ),
        figure_pdf="results/figures/augmentation_{dataset}.pdf",
    log:
        "logs/tables/augmentation_{dataset}.log",
    benchmark:
        "benchmarks/tables/augmentation_{dataset}.tsv"
    localrule: True
    conda:
        "../envs/eval.yaml"
    resources:
        mem_mb=lambda w, attempt: 2000 * attempt,
        runtime=10,
    params:
        provenance=REPORT_LINE,
        tables={"augmentation": "table"},
        figures={"augmentation": "figure"},
        frames={},
    script:
        "../workflow/scripts/report.py"


rule train:
    """Fine-tune one model with its method (listwise or pointwise), resuming from its last checkpoint."""
    input:
        unpack(training_inputs),
    output:
        model=directory("results/models/{model}"),
        curve="results/metrics/train/{model}.parquet",
        figure=report(
            "results/figures/train_{model}.png",
            caption="../docs/captions/train.rst",
            category="Training",
        ),
        figure_pdf="results/figures/train_{model}.pdf",
    log:
        "logs/train/{model}.log",
    benchmark:
        "benchmarks/train/{model}.tsv"
    wildcard_constraints:
        model=alternation(TRAINED or ["__none__"]),
    retries: 2  # a preempted or timed-out attempt resumes from its last checkpoint
    conda:
        "../envs/models.yaml"
    threads: config["threads"]
    resources:
        mem_mb=lambda w, attempt: 16000 * attempt,
        runtime=lambda w, attempt: 1440 * attempt,  # minutes; each retry asks for more time
        nodes=1,  # torchrun runs one process per GPU of one node
        gpu=lambda w: config["training"][w.model]["gpus"],
        cpus_per_gpu=lambda w, threads: max(1, threads // max(1, config["training"][w.model]["gpus"])),
    params:
        provenance=REPORT_LINE,
        run=one_line(lambda w: pbconfig.train_settings(config, w.model)),
        base_path=lambda w: reranker_model_path(config["training"][w.model]["base_model"]),
        prompt=lambda w: config["models"][config["training"][w.model]["base_model"]]["prompt"],
        word_budget=config["reranking"]["word_budget"],
        seed=config["seed"],
        device=config["device"],
        checkpoints=lambda w: paths.checkpoints(w.model),
    script:
        "../workflow/scripts/train.py"


rule training:
    """Stage target: every configured training run."""
    input:
        [paths.model(name) for name in TRAINED],
        expand(
            "results/tables/augmentation_{dataset}.md",
            dataset=sorted({r["data"] for r in config["training"].values() if families.of(r["method"]).augmented}),
        ),
    localrule: True
