"""Collections: loaders for every dataset source the config allows, and the checks they pass.

:func:`load` dispatches on a dataset's ``source`` (see ``config/schema.yaml``):
``irds`` (ir_datasets ids), ``beir`` (a local BEIR folder), ``trec`` (local topics/qrels/corpus),
``imported`` (first-stage candidate lists with passage texts), ``hf_responses`` (response-ranking
sets from the HF hub, UltraFeedback's schema), ``listwise`` (training sets with
teacher permutations), ``synthetic`` (the embedded default collection) and ``toy`` (the default
run's positional-bias task).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from posbias.config import entry_defaults
from posbias.data import imported, irds, listwise, local, responses, synthetic, toy
from posbias.data.collection import Collection, check, check_qrels, qrels_frame
from posbias.permute import derive_seed, fisher_yates

__all__ = ["Collection", "load", "load_qrels"]


def load(name: str, spec: dict, seed: int, irds_home: str | None = None, qrels: bool = True) -> Collection:
    """Load dataset ``name`` described by its config ``spec`` and check it; ``qrels=False`` (a dataset
    with a qrels file of its own, :func:`posbias.config.qrels_file`) neither reads nor checks its
    qrels, which :func:`load_qrels` prepares."""
    key = f"datasets.{name}"
    source = spec["source"]
    spec = {**entry_defaults("datasets", "source", source), **spec}  # as the workflow's validation fills them
    if source == "irds":
        coll, where = irds.load(spec["id"], irds_home), f"ir_datasets:{spec['id']}"
    elif source == "beir":
        coll, where = local.load_beir(spec["path"], spec["split"], key, qrels), spec["path"]
    elif source == "trec":
        coll = local.load_trec(spec["topics"], spec["qrels"] if qrels else None, spec["corpus"], key)
        where = f"{key} (topics {spec['topics']}, qrels {spec['qrels']}, corpus {spec['corpus']})"
    elif source == "imported":
        coll, where = imported.load(spec, key, qrels), key
    elif source == "hf_responses":
        coll, where = responses.load(spec, key), spec.get("path") or f"HF {spec['id']} {spec['split']}"
    elif source == "listwise":
        coll, where = listwise.load(spec, key, seed), spec["path"]
    elif source == "synthetic":
        fields = synthetic.SyntheticSpec.__dataclass_fields__
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items() if k in fields}
        coll = synthetic.generate(synthetic.SyntheticSpec(seed=seed, **params), spec["split"])
        where = key
    elif source == "toy":
        params = {k: v for k, v in spec.items() if k in toy.ToySpec.__dataclass_fields__}
        coll, where = toy.generate(toy.ToySpec(seed=seed, **params), spec["split"]), key
    else:  # the schema forbids this; kept so a schema change cannot slip through silently
        raise ValueError(f"{key}.source: unknown source {source!r}")
    if spec.get("sample_queries"):
        coll = sample_queries(coll, spec["sample_queries"], derive_seed(seed, "sample_queries", name))
    return check(coll, where)


def load_qrels(path: str, queries: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """The checked qrels of a dataset with a qrels file of its own (``path``,
    :func:`posbias.config.qrels_file`), against its prepared queries and corpus: the checks :func:`load`
    runs on a whole collection."""
    return check_qrels(qrels_frame(*local.read_qrels(Path(path))), queries, corpus, path)


def sample_queries(coll: Collection, n: int, seed: int) -> Collection:
    """The collection with a seeded sample of ``n`` of its judged queries (and only their qrels and
    listwise training instances); all queries when it has fewer. A listwise training set samples its
    instances' queries (it may have no qrels). The corpus is kept whole (retrieval searches all of it)."""
    if coll.listwise is not None:
        pool = set(coll.listwise["query_id"].to_list()) & set(coll.queries["query_id"].to_list())
    else:
        pool = set(coll.qrels["query_id"].to_list()) & set(coll.queries["query_id"].to_list())
    keep = set(fisher_yates(sorted(pool), seed)[:n])
    return replace(coll, queries=coll.queries.filter(pl.col("query_id").is_in(keep)),
                   qrels=coll.qrels.filter(pl.col("query_id").is_in(keep)),
                   listwise=None if coll.listwise is None else coll.listwise.filter(pl.col("query_id").is_in(keep)))
