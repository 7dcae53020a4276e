"""The results tree: the one place a result file's path is spelled (``docs/architecture.md``, "Results tree").

Each function returns the path of one kind of artifact; its arguments default to the wildcard of the same
name, so called with none it returns the pattern a rule declares (``reranked()`` is
``results/rerank/{model}/{dataset}/{retriever}/{order}/{debias}.parquet``) and called with values the
file of one job. The rules' input functions and params, the training families' inputs, the plan's cost
files and the reproduction matrix build their paths here; the rules' ``output:`` patterns stay literal
(the catalog's style: a rule says what it writes) and ``tests/test_paths.py`` checks that every pattern
here is one a rule writes, so the two cannot drift apart.

``suffix`` is the file's ending after the stem (``parquet``, ``cost.parquet``, ``stats.json``, ``trec``, …).
"""

from __future__ import annotations

RESULTS = "results"


def data(dataset: str = "{dataset}", table: str = "{table}") -> str:
    """A dataset's table: corpus, queries, qrels, answers or listwise (schemas of the same names)."""
    return f"{RESULTS}/data/{dataset}/{table}.parquet"


def index(dataset: str = "{dataset}", retriever: str = "{retriever}") -> str:
    """A built first-stage index (a folder)."""
    return f"{RESULTS}/index/{dataset}/{retriever}"


def run(dataset: str = "{dataset}", retriever: str = "{retriever}", suffix: str = "parquet") -> str:
    """A first-stage run."""
    return f"{RESULTS}/runs/{dataset}/{retriever}.{suffix}"


def model(name: str = "{model}") -> str:
    """A model built (tiny), converted (GGUF) or trained by the workflow (a ``save_pretrained`` folder)."""
    return f"{RESULTS}/models/{name}"


MODELS = model("")  # the folder every built or trained model lives under, with its trailing slash


def checkpoints(name: str = "{model}") -> str:
    """A training run's checkpoints (resumed after preemption)."""
    return f"{RESULTS}/checkpoints/{name}"


def train_data(dataset: str = "{dataset}", aug: str = "{aug}") -> str:
    """A listwise training set after augmentation."""
    return f"{RESULTS}/train/{dataset}/{aug}.parquet"


def reranked(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
             order: str = "{order}", debias: str = "{debias}", suffix: str = "parquet") -> str:
    """The run a list-level debias method (PermSC@K) combines from reranked shuffled lists, in place of the
    original order (run, cost, stats; a window-level method's orders are :func:`in_batch`)."""
    return f"{RESULTS}/rerank/{model}/{dataset}/{retriever}/{order}/{debias}.{suffix}"


def rerank_batch(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
                 debias: str = "{debias}", part: str = "{part}") -> str:
    """The folder a rerank job writes its batch of orders to."""
    return f"{RESULTS}/rerank/{model}/{dataset}/{retriever}/batches/{debias}.{part}"


def in_batch(model: str, dataset: str, retriever: str, debias: str, part: str, order: str,
             suffix: str = "parquet") -> str:
    """One order's file in the batch folder of the rerank job that reranked it (run, TREC run, window log,
    cost, stats): where everything downstream reads a reranked order."""
    return f"{rerank_batch(model, dataset, retriever, debias, part)}/{order}.{suffix}"


def producer(path: str) -> str:
    """What a rule names as its input in order to read ``path``: the batch folder (a ``directory()`` output,
    whose files Snakemake does not match to their rule) for a file of :func:`in_batch`, else the file."""
    folder, _, _ = path.rpartition("/")
    return folder if folder.rpartition("/")[0].endswith("/batches") else path


def producers(files: list[str]) -> list[str]:
    """:func:`producer` of each file, each once, in order."""
    return list(dict.fromkeys(producer(f) for f in files))


def rerank_metrics(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
                   debias: str = "{debias}", suffix: str = "parquet") -> str:
    """An experiment's per-order metrics (``parquet``), position curve (``curve.parquet``) or summary
    (``summary.parquet``)."""
    return f"{RESULTS}/metrics/rerank/{model}/{dataset}/{retriever}/{debias}.{suffix}"


def retrieval_metrics(dataset: str = "{dataset}", retriever: str = "{retriever}") -> str:
    """A first-stage run's per-query metrics."""
    return f"{RESULTS}/metrics/retrieval/{dataset}/{retriever}.parquet"


def retrieval_summary() -> str:
    """Every first-stage run's mean per measure."""
    return f"{RESULTS}/metrics/retrieval.parquet"


def loss_curve(model: str = "{model}") -> str:
    """A training run's loss curve."""
    return f"{RESULTS}/metrics/train/{model}.parquet"


def stability(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
              debias: str = "{debias}", suffix: str = "parquet") -> str:
    """A scorer's stability rows (``parquet``) or per-query values (``queries.parquet``)."""
    return f"{RESULTS}/metrics/stability/{model}/{dataset}/{retriever}/{debias}.{suffix}"


def decisions(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
              suffix: str = "parquet") -> str:
    """A consumer's decisions and their flips (``parquet``; ``details.parquet``)."""
    return f"{RESULTS}/metrics/decisions/{model}/{dataset}/{retriever}.{suffix}"


def pool(model: str = "{model}", dataset: str = "{dataset}", retriever: str = "{retriever}",
         suffix: str = "parquet") -> str:
    """A pool design's stability and cost."""
    return f"{RESULTS}/metrics/pool/{model}/{dataset}/{retriever}.{suffix}"


def propensity(model: str = "{model}", name: str = "{name}", suffix: str = "parquet") -> str:
    """A propensity-estimation artifact: ``samples``, ``reranked`` (and ``reranked.cost``) or ``omega`` (and
    its heatmap, ``png`` and ``pdf``)."""
    return f"{RESULTS}/propensity/{model}/{name}.{suffix}"


def silver(dataset: str = "{dataset}", teacher: str = "{teacher}", shuffles: str = "{shuffles}",
           suffix: str = "parquet") -> str:
    """A teacher's silver labels over ``shuffles`` shuffles (``parquet``; ``cost.parquet``, ``stats.json``)."""
    return f"{RESULTS}/silver/{dataset}/{teacher}/t{shuffles}.{suffix}"


def plan(name: str = "{name}", suffix: str = "parquet") -> str:
    """The compute plan: its per-order counts (``orders.parquet``) and its table (``cost.md``, …)."""
    return f"{RESULTS}/plan/{name}.{suffix}"


def table(name: str = "{table}", suffix: str = "md") -> str:
    """A table (``md``, ``csv``, ``tex``)."""
    return f"{RESULTS}/tables/{name}.{suffix}"


def figure(name: str = "{figure}", suffix: str = "png") -> str:
    """A figure (``png``, ``pdf``)."""
    return f"{RESULTS}/figures/{name}.{suffix}"
