"""Which result files a figure of the reproduction matrix reads: the workflow's own paths for each kind of
result (:data:`RESULT_SCHEMAS`), the files a bound condition needs (each :class:`~posbias.reproduction.statistics.Statistic`'s
``files``) and every file a config's DAG makes (:func:`available`), so the ``reproduction`` rule declares exactly
its inputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from posbias import config as pbconfig
from posbias import debias, paths

RESULT_SCHEMAS = {"retrieval": "metrics", "rerank": "rerank_metrics", "stability": "stability", "decisions": "decisions",
           "pool": "pool", "propensity": "propensity_samples", "listwise": "listwise"}


def path(source: str, model: str | None = None, dataset: str | None = None, retriever: str | None = None,
         debias: str | None = None) -> str:
    """Where the workflow writes ``source``'s results for one system (the rules' own paths)."""
    return {
        "retrieval": paths.retrieval_metrics(dataset, retriever),
        "rerank": paths.rerank_metrics(model, dataset, retriever, debias),
        "stability": paths.stability(model, dataset, retriever, debias),
        "decisions": paths.decisions(model, dataset, retriever),
        "pool": paths.pool(model, dataset, retriever),
        "propensity": paths.propensity(model, "samples"),
        "listwise": paths.data(dataset, "listwise"),
    }[source]


def systems(bound: dict) -> list[dict]:
    """The bound condition and each of its ``versus`` conditions."""
    return [bound, *bound.get("versus", [])]


def of_kind(source: str, debias_default: str | None = "none") -> Callable[[dict, set[str]], list[str]]:
    """The reader of the ``source`` files each system of a bound condition needs: one per model and cell, at the
    system's debias (else ``debias_default``)."""
    def files(bound: dict, available: set[str]) -> list[str]:
        out = []
        for system in systems(bound):
            for model in system.get("models") or [None]:
                for dataset, retriever in system.get("cells") or [(None, None)]:
                    out.append(path(source, model, dataset, retriever, system.get("debias", debias_default)))
        return list(dict.fromkeys(out))
    return files


def list_level(method: str) -> bool:
    """Whether a debias value aggregates K reranked lists into one (PermSC over the shuffles)."""
    try:
        return debias.parse(method).level == "list"
    except ValueError:
        return False


# A ``versus`` debias of rerank_wins over shuffles: at shuffle seed s, the system's list-level aggregate over its
# first s + 1 reranked shuffles (K = s + 1; K = 1: its plain run on shuffle s), as DebiasFirst's Figure 5 indexes
# its lines by shuffle order.
AGGREGATE_PER_RUN = "aggregate@run"


def wins_files(bound: dict, available: set[str]) -> list[str]:
    """rerank_wins' files: each system's, and for a ``versus`` read at :data:`AGGREGATE_PER_RUN` its plain file
    and every list-level aggregate's."""
    out = [f for system in systems(bound) for f in
           (aggregate_files({**system, "debias": "none"}, available) if system.get("debias") == AGGREGATE_PER_RUN
            else of_kind("rerank")({k: v for k, v in system.items() if k != "versus"}, available))]
    return list(dict.fromkeys(out))


def aggregate_files(bound: dict, available: set[str]) -> list[str]:
    """The plain system's file and every list-level aggregation (PermSC@K) file the run has for it."""
    plain = of_kind("rerank")(bound, available)
    (dataset, retriever), = bound["cells"]
    more = [f for m in bound["models"] for f in available
            if Path(f).parent == Path(paths.rerank_metrics(m, dataset, retriever)).parent
            and list_level(Path(f).name.removesuffix(".parquet"))]
    return plain + sorted(more)


def available(config: dict) -> set[str]:
    """Every result file of :data:`RESULT_SCHEMAS`' kinds that a (prepared) config's DAG makes."""
    files = {path("retrieval", dataset=d, retriever=r) for d, r in pbconfig.grid(config)}
    files |= {path("rerank", m, d, r, b) for m, d, r, b in pbconfig.summaries(config)}
    files |= {path("stability", *target) for target in pbconfig.stability_targets(config)}
    files |= {path("decisions", *target) for target in pbconfig.decision_targets(config)}
    files |= {path("pool", *target) for target in pbconfig.pool_targets(config)}
    files |= {path("listwise", dataset=d) for d in pbconfig.listwise_datasets(config)}
    if config.get("propensity", {}).get("model"):
        files.add(path("propensity", config["propensity"]["model"]))
    return files
