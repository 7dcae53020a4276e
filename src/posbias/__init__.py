"""posbias: a reference pipeline for position-bias research on LLM rerankers.

The package holds all logic; the Snakemake rules only read inputs, call it and write outputs.
One module per idea: ``schemas`` (Parquet contracts), ``data`` (collections), ``retrieval``
(first-stage runs), ``metrics`` (ir_measures evaluation), ``config`` (validation).
"""

__version__ = "0.17.0"  # CHANGELOG.md; a release is tagged v<version>
