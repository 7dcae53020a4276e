"""Collections: loaders for every dataset source the config allows, and the checks they pass.

:func:`load` reads a dataset's ``source`` from :data:`SOURCES` (``config/schema.yaml``'s ``source`` enum lists
the same names, a test checks): ``irds`` (ir_datasets ids), ``beir`` (a local BEIR folder), ``trec`` (local
topics/qrels/corpus), ``imported`` (first-stage candidate lists with passage texts), ``hf_responses``
(response-ranking sets from the HF hub, UltraFeedback's schema), ``listwise`` (training sets with teacher
permutations), ``synthetic`` (the embedded default collection) and ``toy`` (the default run's positional-bias
task).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import polars as pl

from posbias.config import entry_defaults
from posbias.data import imported, irds, listwise, local, responses, synthetic, toy
from posbias.data.collection import Collection, check, check_qrels, qrels_frame
from posbias.permute import derive_seed, fisher_yates

__all__ = ["Collection", "load", "load_qrels"]


def _trec(spec: dict, key: str, seed: int, irds_home: str | None, qrels: bool) -> tuple[Collection, str]:
    coll = local.load_trec(spec["topics"], spec["qrels"] if qrels else None, spec["corpus"], key)
    return coll, f"{key} (topics {spec['topics']}, qrels {spec['qrels']}, corpus {spec['corpus']})"


def _synthetic(spec: dict, key: str, seed: int, irds_home: str | None, qrels: bool) -> tuple[Collection, str]:
    fields = synthetic.SyntheticSpec.__dataclass_fields__
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items() if k in fields}
    return synthetic.generate(synthetic.SyntheticSpec(seed=seed, **params), spec["split"]), key


def _toy(spec: dict, key: str, seed: int, irds_home: str | None, qrels: bool) -> tuple[Collection, str]:
    params = {k: v for k, v in spec.items() if k in toy.ToySpec.__dataclass_fields__}
    return toy.generate(toy.ToySpec(seed=seed, **params), spec["split"]), key


# Each source's loader: (the entry with the schema's defaults, its "datasets.<name>" key, the seed, the
# ir_datasets home, whether to read its qrels) -> (the collection, where it came from, for the checks' messages)
SOURCES: dict[str, Callable[[dict, str, int, str | None, bool], tuple[Collection, str]]] = {
    "irds": lambda spec, key, seed, home, qrels: (irds.load(spec["id"], home), f"ir_datasets:{spec['id']}"),
    "beir": lambda spec, key, seed, home, qrels: (
        local.load_beir(spec["path"], spec["split"], key, qrels), spec["path"]),
    "trec": _trec,
    "imported": lambda spec, key, seed, home, qrels: (imported.load(spec, key, qrels), key),
    "hf_responses": lambda spec, key, seed, home, qrels: (
        responses.load(spec, key), spec.get("path") or f"HF {spec['id']} {spec['split']}"),
    "listwise": lambda spec, key, seed, home, qrels: (listwise.load(spec, key, seed), spec["path"]),
    "synthetic": _synthetic,
    "toy": _toy,
}


def load(name: str, spec: dict, seed: int, irds_home: str | None = None, qrels: bool = True) -> Collection:
    """Load dataset ``name`` described by its config ``spec`` and check it; ``qrels=False`` (a dataset
    with a qrels file of its own, :func:`posbias.config.qrels_file`) neither reads nor checks its
    qrels, which :func:`load_qrels` prepares."""
    key = f"datasets.{name}"
    source = spec["source"]
    spec = {**entry_defaults("datasets", "source", source), **spec}  # as the workflow's validation fills them
    if source not in SOURCES:  # the schema forbids this; kept so a schema change cannot slip through silently
        raise ValueError(f"{key}.source: unknown source {source!r}")
    coll, where = SOURCES[source](spec, key, seed, irds_home, qrels)
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
