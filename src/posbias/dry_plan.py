"""The compute plan of a config in a dry environment: no data, GPU or model weights on the machine.

Each dataset becomes one stand-in query with the full depth of candidate passages of its collection's
mean length (:class:`StandIns`, from ``docs/plan/standins.yaml``), written where the data and
first-stage stages would write them; :func:`posbias.plan.plan_orders` plans on them (the first
:data:`ORDERS_COUNTED` shuffled and position orders of each experiment counted, the others at their mean), and every count is
scaled to the dataset's real number of queries (ir_datasets' metadata, offline, or the count the
stand-ins file gives for a file the user provides). Every count is then an estimate (``~``).

    python -m posbias.dry_plan config/paper/*.yaml [--out DIR]       # DIR/<preset>.md, .csv, .tex (+ <preset>-serving.*)
    python -m posbias.dry_plan --readme docs/presets.md config/paper/*.yaml # the preset table

With the data at hand, ``snakemake plan`` counts exactly instead.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import polars as pl
import yaml

from posbias import config as pbconfig
from posbias import orders, paths, schemas
from posbias.errors import PosbiasError
from posbias.plan import JOB_FAMILIES, plan_orders, serving, serving_settings, serving_table, summary, table, with_seconds

STAND_INS = Path(__file__).resolve().parents[2] / "docs" / "plan" / "standins.yaml"
# Shuffled and position orders counted per experiment and debias method: every such order of a stand-in reranks
# the same passages rearranged, so the others take their mean (a preset's 100 shuffles and 20 positions cost as
# much to count as 3 of each; counting 3 shuffles per rerank job instead moved the presets' totals by under 0.1%).
ORDERS_COUNTED = 3
README_START = "<!-- posbias.dry_plan presets: start -->"
README_END = "<!-- posbias.dry_plan presets: end -->"

# Words the stand-in passages and queries are made of (varied lengths, as in English text).
_WORDS = ("the retrieval of relevant passages for a query is ranked by a model that reads each candidate "
          "and its position in the list may change the answer it gives").split()


def _text(words: float, offset: int = 0) -> str:
    n = max(1, round(words))
    return " ".join(_WORDS[(offset + i) % len(_WORDS)] for i in range(n))


class StandIns:
    """One stand-in query per dataset, with ``depth`` candidate passages of the dataset's mean length,
    written under ``root`` as the data and first-stage stages would write them; ``__call__`` scales a
    plan row to the dataset's real number of queries.

    ``table`` (docs/plan/standins.yaml) gives the mean passage and query words per collection and the
    query counts of files the user provides and of HF datasets (``hf``, by id and split, with the
    candidates each query lists); ir_datasets
    ids take their query counts from
    ir_datasets' metadata (offline). Every count the plan derives from stand-ins is an estimate: each
    query is taken to have the full depth of candidates and a relevant passage in its top
    ``position_k`` (so every position order applies).
    """

    def __init__(self, config: dict, table: dict, root: Path, depth: int = 100):
        self.queries: dict[str, int] = {}
        for name, spec in config["datasets"].items():
            n, words, candidates = self._size(name, spec, table)
            self.queries[name] = n
            self._write(root, name, spec, config, words, min(depth, candidates or depth))

    @staticmethod
    def _size(name: str, spec: dict, table: dict) -> tuple[int, dict, int | None]:
        """(queries, mean words, candidates per query where the dataset lists a fixed number)."""
        candidates = None
        if spec["source"] == "irds":
            import ir_datasets

            n = ir_datasets.load(spec["id"]).queries_count()
            n = min(n, spec["sample_queries"]) if spec.get("sample_queries") else n
            collection = next((c for c in table["words"] if spec["id"].startswith(c)), None)
        elif spec["source"] == "hf_responses" and not spec.get("path"):
            entry = table.get("hf", {}).get(f"{spec['id']} {spec['split']}")
            if entry is None:
                raise PosbiasError(f"docs/plan/standins.yaml: no query count for datasets.{name} ({spec['id']} "
                                   f"{spec['split']}); add it under `hf`")
            n, collection, candidates = entry["queries"], entry["words"], entry.get("candidates")
        else:
            paths = pbconfig.dataset_files(spec)
            entry = next((table["files"][p] for p in paths if p in table["files"]), None)
            if entry is None:
                raise PosbiasError(f"docs/plan/standins.yaml: no query count for datasets.{name} ({', '.join(paths)}); "
                                   "add it under `files`")
            n, collection = entry["queries"], entry["words"]
        if collection not in table["words"]:
            raise PosbiasError(f"docs/plan/standins.yaml: no mean lengths for datasets.{name}; add its collection "
                               "under `words`")
        return n, table["words"][collection], candidates

    @staticmethod
    def _write(root: Path, name: str, spec: dict, config: dict, words: dict, depth: int) -> None:
        base = root / "results" / "data" / name
        docs = [f"{name}-d{i}" for i in range(depth)]
        texts = [_text(words["passage"], i) for i in range(depth)]
        schemas.write(pl.DataFrame({"query_id": ["q0"], "text": [_text(words["query"])]}), base / "queries.parquet",
                      "queries")
        schemas.write(pl.DataFrame({"doc_id": docs, "title": [""] * depth, "text": texts}), base / "corpus.parquet",
                      "corpus")
        schemas.write(pl.DataFrame({"query_id": ["q0"], "doc_id": [docs[0]], "relevance": [3]}),
                      base / "qrels.parquet", "qrels")
        run = pl.DataFrame({"query_id": ["q0"] * depth, "doc_id": docs, "rank": list(range(1, depth + 1)),
                            "score": [float(depth - i) for i in range(depth)]})
        for retriever in pbconfig.dataset_retrievers(config, name):
            schemas.write(run, root / "results" / "runs" / name / f"{retriever}.parquet", "run")
        if spec["source"] == "listwise" or name in pbconfig.listwise_datasets(config):
            schemas.write(pl.DataFrame({"query_id": ["q0"], "query": [_text(words["query"])], "doc_ids": [docs[:20]],
                                        "texts": [texts[:20]], "teacher_ranking": [docs[:20]]}),
                          base / "listwise.parquet", "listwise")

    def __call__(self, dataset: str, cap: int | None = None) -> float:
        return float(min(self.queries[dataset], cap or math.inf))


def plan(path: str | Path, stand_ins: str | Path = STAND_INS) -> tuple[pl.DataFrame, dict]:
    """(job orders with seconds, the prepared config) of the config file at ``path``, on stand-ins in a
    scratch folder; the throughput table is read relative to the working directory, as in the workflow."""
    config = pbconfig.load(path, files=False)
    with tempfile.TemporaryDirectory(prefix="posbias-plan-") as tmp:
        scale = StandIns(config, yaml.safe_load(Path(stand_ins).read_text()), Path(tmp))
        return with_seconds(plan_orders(config, Path(tmp), scale, ORDERS_COUNTED), config), config


def shuffled_share(orders_: pl.DataFrame) -> tuple[float, int]:
    """(device-hours of the rerank jobs' shuffled orders, how many shuffle seeds they use): what a
    reading with fewer shuffles would save (model seconds; the model loads are shared with the other
    orders of a job)."""
    part = orders_.filter((pl.col("family") == "rerank") & pl.col("order").str.starts_with(orders.prefix("shuffled")))
    return float(part["model_seconds"].sum()) / 3600, part["order"].n_unique()


def preset_summaries(configs: list[Path], stand_ins: str | Path = STAND_INS) -> dict[str, tuple]:
    """Each config's :func:`posbias.plan.summary` on stand-ins, its ``plan.device``, its
    :func:`shuffled_share`, and its summary with every model vLLM serves on the vLLM engine (the same
    calls and tokens at the table's vLLM rows), by file stem."""
    out = {}
    for path in configs:
        orders_, config = plan(path, stand_ins)
        on_vllm = with_seconds(orders_, config, engine="vllm")
        out[Path(path).stem] = (summary(orders_, config), config["plan"]["device"], shuffled_share(orders_),
                                summary(on_vllm, config))
    return out


def readme_block(summaries: dict[str, tuple[pl.DataFrame, str]]) -> str:
    """The presets' plan table (docs/presets.md) (:func:`preset_summaries`): per preset and family, and in
    total."""
    lines = [README_START, "", "| preset | family | jobs | model loads | model calls | prompt tokens | device-hours "
             "(transformers) | device-hours (vLLM) |", "|---|---|---|---|---|---|---|---|"]
    for stem, (summary_, _, _, on_vllm) in summaries.items():
        parts = [(f, summary_.filter(pl.col("family") == f), on_vllm.filter(pl.col("family") == f))
                 for f in JOB_FAMILIES if f in set(summary_["family"])]
        for family, part, vllm_part in [*parts, ("all", summary_, on_vllm)]:
            lines.append(f"| {stem} | {family} | {part['jobs'].sum():,} | {part['model_loads'].sum():,} | "
                         f"{part['calls'].sum():,} | {part['prompt_tokens'].sum():,} | "
                         f"{part['device_hours'].sum():,.0f} | {vllm_part['device_hours'].sum():,.0f} |")
    lines += ["", "| preset | shuffle seeds | device-hours of the shuffled orders | per shuffle seed |", "|---|---|---|---|"]
    for stem, (summary_, _, (hours, seeds), _) in summaries.items():
        lines.append(f"| {stem} | {seeds} | {hours:,.0f} | {hours / max(seeds, 1):,.1f} |")
    lines += ["", "| preset | tokens counted with | models |", "|---|---|---|"]
    for stem, (summary_, _, _, _) in summaries.items():
        by = summary_.group_by("tokenizer", maintain_order=True).agg(pl.col("model").n_unique())
        lines += [f"| {stem} | {tokenizer} | {models} |" for tokenizer, models in by.iter_rows()]
    devices = sorted({device for _, device, _, _ in summaries.values()})
    lines += ["", f"Device-hours on {', '.join(devices)} (config/throughput.yaml), as the presets say (every model "
              "on transformers) and with every listwise model on vLLM (the same calls and tokens at the table's vLLM "
              "rows; the Grades scorer and training stay on transformers); the shuffled orders' share "
              "(their model time; loads are shared) is what a reading with fewer shuffles saves. A model whose own "
              "tokenizer is not in the local HF cache has its tokens counted by the real tokenizer of its family "
              "(posbias.standins) or, failing one, the rule of thumb (the table above says which). Written by "
              "`python -m posbias.dry_plan --readme docs/presets.md config/paper/*.yaml`; a test checks it is current.",
              "", README_END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Each config's dry plan as DIR/<config name>.md, .csv and .tex, with one summary line per config
    on stdout; or, with ``--readme FILE``, the preset table in FILE (docs/presets.md) rewritten. A config the plan refuses (a
    :class:`PosbiasError`, or a config check's ValueError) is one line on stderr and exit status 1."""
    import argparse
    import logging

    parser = argparse.ArgumentParser(prog="python -m posbias.dry_plan", description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--stand-ins", type=Path, default=STAND_INS, help="the stand-ins file")
    parser.add_argument("--out", type=Path, default=Path(paths.plan()).parent)
    parser.add_argument("--readme", type=Path, help="rewrite the preset plan table in this file (docs/presets.md)")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    try:
        _main(args)
    except (PosbiasError, ValueError) as exc:  # the config's checks raise ValueError, the plan PosbiasError
        print(f"posbias.dry_plan: {exc}", file=sys.stderr)
        return 1
    return 0


def _main(args) -> None:
    from posbias.paper.writers import write

    if args.readme:
        text = args.readme.read_text()
        start, end = text.index(README_START), text.index(README_END) + len(README_END)
        block = readme_block(preset_summaries(args.configs, args.stand_ins))
        args.readme.write_text(text[:start] + block + text[end:])
        return
    for path in args.configs:
        orders_, config = plan(path, args.stand_ins)
        summary_, device = summary(orders_, config), config["plan"]["device"]
        write(table(summary_, device), args.out / path.stem, f"Compute plan of {path} on {device} (stand-in data)")
        write(serving_table(serving(orders_, **serving_settings(config))), args.out / f"{path.stem}-serving",
              f"Serving budgets per query of {path} (planned on stand-in data)")
        print(f"plan {path}: jobs={summary_['jobs'].sum()} model_loads={summary_['model_loads'].sum()} "
              f"calls={summary_['calls'].sum()} prompt_tokens={summary_['prompt_tokens'].sum()} "
              f"{device}_hours={summary_['device_hours'].sum():.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
