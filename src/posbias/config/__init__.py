"""The workflow's config: its schema and defaults, one-line errors, checks, expansions, grid and per-rule params.

Validation itself is against ``config/schema.yaml`` (Snakemake's ``validate`` in the workflow, :func:`validate`
outside it), which also fills the defaults; :func:`explain` turns a jsonschema error into one line naming
the key, the problem and the fix, with a "did you mean" for mistyped keys. One module per concern, none
importing an implementation (only the registries):

- :mod:`~posbias.config.schema_defaults`: the schema, read once, and its defaults (the ground floor);
- :mod:`~posbias.config.messages`: one-line errors (jsonschema, YAML syntax, duplicate keys);
- :mod:`~posbias.config.files`: the files a config names, checked, and optional datasets dropped;
- :mod:`~posbias.config.experiments`: the experiment grid, orders, consumers, silver labels, report targets;
- :mod:`~posbias.config.params`: the per-rule param slices;
- :mod:`~posbias.config.expansion`: base models and seeds expanded, trained models registered;
- :mod:`~posbias.config.effects`: settings that would do less than they seem (refused, or notices);
- :mod:`~posbias.config.checks`: the cross-reference checks in the workflow's order (:func:`prepare`),
  :func:`load` and ``python -m posbias.config FILE``.

Every name is importable from ``posbias.config`` as before the split.
"""

from posbias.config.checks import (
    CONFIG_CHANGES,
    check_consumers,
    check_experiment_data,
    check_experiments,
    check_grid,
    check_settings,
    load,
    main,
    prepare,
    validate,
)
from posbias.config.effects import adaptive_budgets, check_adaptive, notices
from posbias.config.expansion import base_pairs, check_hyper, expand_bases, expand_seeds, register_trained_models
from posbias.config.experiments import (
    IMPORTED_PREFIX,
    batch_of_order,
    made_here,
    consumer_of,
    consumer_window,
    dataset_retrievers,
    decision_targets,
    experiment_key,
    find_experiment,
    grid,
    is_pointwise,
    listwise_datasets,
    needs_reader,
    ocsft_reference,
    ocsft_variants,
    orders_for,
    orders_of,
    pool_targets,
    prebuilt_index,
    relevant_grade,
    rerank_batches,
    rerank_grid,
    reranked_file,
    retriever_kind,
    silver_path,
    silver_retriever,
    silver_shuffles,
    silver_teacher,
    silver_window,
    served_widths,
    stability_targets,
    summaries,
    variant_of,
)
from posbias.config.files import (
    check_files,
    data_settings,
    dataset_files,
    drop_unavailable,
    named_files,
    qrels_file,
    text_files,
)
from posbias.config.messages import check_duplicate_keys, explain, explain_config, exponent_hint, yaml_syntax
from posbias.config.params import (
    TRAIN_OPERATIONAL,
    label_budget,
    model_settings,
    pointwise_settings,
    position_settings,
    rerank_settings,
    scored_base_pairs,
    scored_pointwise_variants,
    silver_jobs,
    sorted_keys,
    teacher_study,
    train_settings,
    training_labels,
)
from posbias.config.schema_defaults import (
    SCHEMA,
    defaults,
    entry_defaults,
    fill_defaults,
    model_defaults,
    schema,
    schema_node,
)

__all__ = [
    "CONFIG_CHANGES", "IMPORTED_PREFIX", "SCHEMA", "TRAIN_OPERATIONAL", "base_pairs", "batch_of_order", "sorted_keys", "adaptive_budgets", "check_adaptive",
    "check_consumers", "notices",
    "check_duplicate_keys", "check_experiment_data", "check_experiments", "check_files", "check_grid", "check_hyper",
    "check_settings", "made_here", "consumer_of", "consumer_window", "data_settings", "dataset_files", "dataset_retrievers",
    "decision_targets", "defaults", "drop_unavailable", "entry_defaults", "expand_bases", "expand_seeds",
    "experiment_key", "explain", "explain_config", "exponent_hint", "fill_defaults", "find_experiment", "grid",
    "is_pointwise", "label_budget", "listwise_datasets", "load", "main", "model_defaults", "model_settings", "named_files",
    "needs_reader", "ocsft_reference", "ocsft_variants", "orders_for", "orders_of", "pointwise_settings", "scored_base_pairs",
    "scored_pointwise_variants",
    "pool_targets", "position_settings", "prebuilt_index", "prepare", "qrels_file", "register_trained_models", "relevant_grade",
    "rerank_batches", "rerank_grid", "reranked_file", "rerank_settings", "retriever_kind", "schema", "schema_node", "silver_path",
    "served_widths", "silver_jobs", "silver_retriever", "silver_shuffles", "silver_teacher", "silver_window", "stability_targets", "summaries",
    "teacher_study", "text_files", "train_settings", "training_labels", "validate", "variant_of", "yaml_syntax",
]
