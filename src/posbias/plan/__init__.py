"""The compute plan of a config: what a run costs, known before it runs (``snakemake plan``).

Per rule family (``rerank``, ``propensity_rerank``, ``silver_labels``, ``pool_design``, ``train``) and model: jobs, model
loads, windows, model calls, prompt tokens, and the device-hours they take on one device of the
throughput table (``config/throughput.yaml``, :func:`with_seconds` and :func:`summary`).

Calls and prompt tokens are counted, not modelled: the plan runs the reranking code itself
(:func:`posbias.rerank.rerank_order`, :func:`posbias.silver.silver_labels`, the propensity lists) with
every language model built tokenizer-only (``rerankers.build(..., loaded=(tokenizer, None))``): each
prompt is rendered and tokenised exactly as the job does it, and the forward pass is replaced by equal
scores. So the counts are exact wherever they do not depend on what the model answers:

- one window per list (depth ≤ window), pointwise Grades windows, propensity lists, CapCal's prompts
  and content-free priors, PermSC-window and BSC views: calls and tokens exact;
- simulated rerankers run for real (they are cheap): exact;
- sliding windows after the first hold passages the model promoted; the plan takes them as if the
  model returned its input order: calls exact, tokens estimated (``tokens_exact`` false);
- generation: the decoding steps depend on the answer; calls are their bound, ``max_new_tokens`` per
  window (``calls_exact`` false);
- a tokenizer not on disk (an HF id outside the local cache): tokens from the real tokenizer of its
  family where :mod:`posbias.standins` has one (Mistral's SentencePiece for Zephyr-family ids, Qwen's
  BPE for Qwen2/2.5/3 ids), else from :class:`RuleOfThumbTokenizer`; ``tokens_exact`` false either way
  (the stand-in is not the checkpoint's own file), and the ``tokenizer`` column says which;
- training: steps from the schedule, tokens from a sample of its instances (estimated).

After a run, :func:`versus_run` puts the plan beside the ``*.cost.parquet`` the jobs wrote. Without the
data (a dry environment), :mod:`posbias.dry_plan` plans on stand-ins.

One module per concern: :mod:`~posbias.plan.counting` (the counts: calls, tokens, windows per job order),
:mod:`~posbias.plan.token_counters` (tokenizers that count without a model), :mod:`~posbias.plan.throughput`
(the throughput table and the model seconds it gives), :mod:`~posbias.plan.report` (the summary, its table,
the comparison with a run's cost files). Every name is importable from ``posbias.plan`` as before the split.
"""

from posbias.plan.counting import (
    JOB_FAMILIES,
    ORDER_SCHEMA,
    SIMULATED,
    TRAIN_SAMPLE,
    Counting,
    counting_reranker,
    inputs,
    plan_orders,
    plan_pool,
    plan_propensity,
    plan_rerank,
    plan_silver,
    plan_train,
    settings,
    tokenizer_source,
)
from posbias.plan.report import actual, check_table, cost_files, summary, table, tokenizers, versus_run
from posbias.plan.serving import serving, serving_table
from posbias.plan.serving import settings as serving_settings
from posbias.plan.throughput import (
    DEFAULT_ENGINE,
    WORKFLOW,
    Throughput,
    check_throughput,
    engine_of,
    model_params_b,
    parameters_b,
    read_throughput,
    throughput_for,
    throughput_path,
    with_seconds,
)
from posbias.plan.token_counters import RULE_OF_THUMB, MemoTokenizer, RuleOfThumbTokenizer

__all__ = [
    "Counting",
    "DEFAULT_ENGINE",
    "JOB_FAMILIES",
    "MemoTokenizer",
    "ORDER_SCHEMA",
    "RULE_OF_THUMB",
    "RuleOfThumbTokenizer",
    "SIMULATED",
    "TRAIN_SAMPLE",
    "Throughput",
    "WORKFLOW",
    "actual",
    "check_table",
    "check_throughput",
    "cost_files",
    "counting_reranker",
    "engine_of",
    "inputs",
    "model_params_b",
    "parameters_b",
    "plan_orders",
    "plan_pool",
    "plan_propensity",
    "plan_rerank",
    "plan_silver",
    "plan_train",
    "read_throughput",
    "serving",
    "serving_settings",
    "serving_table",
    "settings",
    "summary",
    "table",
    "throughput_for",
    "throughput_path",
    "tokenizer_source",
    "tokenizers",
    "versus_run",
    "with_seconds",
]
