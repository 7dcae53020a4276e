"""First-stage retriever kinds (``retrievers.<name>.kind``): what each reads, builds and runs.

An entry carries the kind's behaviour, so the rules, the config checks and the one generic ``index`` and
``retrieve`` script test no kind's name:

- ``search``: the function that writes the run, as ``"module:function"`` taking a :class:`RetrievalJob` and
  returning (canonical run, ids of queries without hits); imported only when a job runs it.
- ``index``: the function that builds the kind's index from the corpus first (rule ``index``), taking the
  job and the output folder; None for a kind that searches the dataset's own tables. A kind with an index
  may search a pyserini prebuilt one instead (``datasets.<name>.prebuilt``).
- ``reads``: the dataset tables its search reads (``queries``, ``corpus``, ``qrels``), and ``runs`` for the
  first-stage runs it fuses (the entry's ``runs``).
- ``encoder``: it runs a neural encoder (the entry's ``model``), so its jobs ask SLURM for a GPU under
  ``device: cuda``; ``seeded``: its run depends on the config's ``seed``; ``threaded``: its jobs use
  ``threads`` cores.

Imported runs are not a kind: they are files named by the dataset (``imported:<name>``, rule ``import_run``).
This module imports nothing of posbias but :mod:`posbias.registry`, so the config layer reads it without the
implementations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from posbias import registry

DATASET_TABLES = ("queries", "corpus", "qrels")  # the dataset tables a search may read


@dataclass(frozen=True)
class RetrieverKind:
    """One ``retrievers.<name>.kind``: see the module docstring."""

    description: str
    search: str
    index: str | None = None
    reads: tuple[str, ...] = ("queries",)
    encoder: bool = False
    seeded: bool = False
    threaded: bool = True


@dataclass
class RetrievalJob:
    """What an index or search function may read: the ``retrievers`` entry (``spec``), the dataset tables it
    declared (``data``, by name), the runs it fuses (``runs``, in the entry's order), the index (a built
    folder or a prebuilt index's name), the resolved encoder reference, the device, the job's threads and
    the config seed."""

    spec: dict
    data: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)
    index: Path | str | None = None
    model: str | None = None
    device: str = "cpu"
    threads: int = 1
    seed: int = 0


# By config name; config/schema.yaml's retriever `kind` enum lists the same names (a test checks).
RETRIEVER_KINDS: dict[str, RetrieverKind] = {
    "bm25": RetrieverKind("BM25 over a Lucene index (pyserini)", "posbias.retrieval.lucene:search_job",
                          index="posbias.retrieval.lucene:index_job"),
    "dense": RetrieverKind("a bi-encoder over a flat faiss index (pyserini encoders)",
                           "posbias.retrieval.dense:search_job", index="posbias.retrieval.dense:index_job",
                           encoder=True),
    "splade": RetrieverKind("SPLADE over a Lucene impact index (pyserini)", "posbias.retrieval.splade:search_job",
                            index="posbias.retrieval.splade:index_job", encoder=True),
    "rrf": RetrieverKind("reciprocal-rank fusion of other runs (pyserini)", "posbias.retrieval.fusion:search_job",
                         reads=("runs",), threaded=False),
    "oracle": RetrieverKind("qrels grade + seeded noise over the judged documents (a first stage of known quality)",
                            "posbias.retrieval.oracle:search_job", reads=("queries", "qrels"), seeded=True,
                            threaded=False),
    "listed": RetrieverKind("a query's judged documents in the order the dataset lists them",
                            "posbias.retrieval.listed:search_job", reads=("queries", "corpus", "qrels"),
                            threaded=False),
}


def get(name: str) -> RetrieverKind:
    """The registered kind ``name``; ValueError naming the registered ones otherwise."""
    return registry.entry(RETRIEVER_KINDS, name, "retriever kind")


def names(indexed: bool | None = None) -> list[str]:
    """The kind names, only those that build an index (``indexed=True``) or only those that do not."""
    return [n for n, k in RETRIEVER_KINDS.items() if indexed is None or (k.index is not None) == indexed]


def build_index(kind: str, job: RetrievalJob, out: Path) -> None:
    """Build ``kind``'s index of ``job.data["corpus"]`` into ``out``."""
    target = get(kind).index
    if target is None:
        raise ValueError(f"retriever kind {kind!r} builds no index; it searches the dataset's tables")
    registry.load(target)(job, Path(out))


def search(kind: str, job: RetrievalJob):
    """``kind``'s run for ``job``: (canonical run, ids of queries with no hits)."""
    return registry.load(get(kind).search)(job)
