"""Same config, same bytes: compare two results folders, apart from the declared timing fields.

    python -m posbias.compare RESULTS_A RESULTS_B

Two runs of one config write identical artifacts except for wall-clock measurements, which are declared
here (:data:`TIMING_FIELDS`: Parquet columns, JSON keys and table columns) and the provenance record
(it names the commit, which may differ). Parquet files are compared by frame, JSON by value, tables
(CSV by column; Markdown, LaTeX and TREC by line) as text. Prints one line per differing or missing file
and a summary; exits 1 when anything differs. Where both folders have a rerank table, it also prints how its
metrics moved per experiment and method (:func:`metric_deltas`: B − A), for two configs as much as two runs.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import polars as pl

from posbias.provenance import KEY

# Wall-clock measurements, the only fields that may differ between two runs of the same config.
TIMING_FIELDS = frozenset({"seconds", "wall_seconds", "seconds_per_query", "seconds_per_query_method",
                           "train_seconds", "s/query", "training s", "tokens_per_s"})
_TEXT = {".md", ".tex", ".trec"}


def _parquet(a: Path, b: Path) -> bool:
    x, y = pl.read_parquet(a), pl.read_parquet(b)
    keep = [c for c in x.columns if c not in TIMING_FIELDS]
    return x.columns == y.columns and x.select(keep).equals(y.select(keep))


def _json(a: Path, b: Path) -> bool:
    def strip(value):
        return {k: v for k, v in value.items() if k not in TIMING_FIELDS} if isinstance(value, dict) else value

    return strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))


def _csv(a: Path, b: Path) -> bool:
    def rows(path: Path) -> list[dict]:
        return [{k: v for k, v in row.items() if k not in TIMING_FIELDS}
                for row in csv.DictReader(io.StringIO(path.read_text()))]

    return rows(a) == rows(b)


def _text(a: Path, b: Path) -> bool:
    """Lines equal apart from the provenance lines; the timing columns of a Markdown or LaTeX table
    (found by their header) are blanked."""
    def lines(path: Path) -> list[str]:
        sep = "&" if path.suffix == ".tex" else "|"
        out, timing = [], set()
        for line in path.read_text().splitlines():
            if "Produced by posbias" in line or KEY in line:
                continue
            if sep in line:
                cells = line.strip().removesuffix("\\\\").strip(sep).split(sep)
                if not timing and any(c.strip() in TIMING_FIELDS for c in cells):
                    timing = {i for i, c in enumerate(cells) if c.strip() in TIMING_FIELDS}
                line = sep.join("" if i in timing else c for i, c in enumerate(cells))
            out.append(line)
        return out

    return lines(a) == lines(b)


def compare(a: Path, b: Path) -> list[str]:
    """One line per artifact of ``a`` that is missing from ``b`` or differs from it."""
    problems = []
    for path in sorted(p for p in a.rglob("*") if p.is_file()):
        other = b / path.relative_to(a)
        check = {".parquet": _parquet, ".json": _json, ".csv": _csv}.get(path.suffix) or (
            _text if path.suffix in _TEXT else None)
        if check is None:
            continue
        if not other.is_file():
            problems.append(f"missing: {path.relative_to(a)}")
        elif not check(path, other):
            problems.append(f"differs: {path.relative_to(a)}")
    return problems


KEYS = ("model", "dataset", "retriever", "debias")
METRICS = ("ndcg10_original", "ndcg10_shuffled_mean", "tau_psi", "psi")  # the rerank table's headline columns


def metric_deltas(a: Path, b: Path) -> pl.DataFrame:
    """The rerank table's headline metrics of both folders (``tables/rerank.csv``) side by side, per experiment and
    debiasing method both have, with B − A; empty where either folder has no rerank table."""
    files = [folder / "tables" / "rerank.csv" for folder in (a, b)]
    if not all(f.is_file() for f in files):
        return pl.DataFrame()
    x, y = (pl.read_csv(f, infer_schema_length=None).select(*KEYS, *METRICS) for f in files)
    joined = x.join(y, on=list(KEYS), suffix="_b")
    return joined.select(*KEYS, *((pl.col(f"{m}_b") - pl.col(m)).alias(f"Δ {m}") for m in METRICS))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m posbias.compare", description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, metavar="RESULTS_A")
    parser.add_argument("b", type=Path, metavar="RESULTS_B")
    args = parser.parse_args(argv)
    a, b = args.a, args.b
    problems = compare(a, b)
    for line in problems:
        print(line)
    deltas = metric_deltas(a, b)
    if deltas.height:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=160, float_precision=4, tbl_hide_dataframe_shape=True):
            print(f"rerank metrics, B − A:\n{deltas}")
    checked = sum(1 for p in a.rglob("*") if p.is_file() and p.suffix in {".parquet", ".json", ".csv", *_TEXT})
    print(f"{checked} artifacts compared, {len(problems)} differ or are missing "
          f"(timing fields aside: {', '.join(sorted(TIMING_FIELDS))})")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
