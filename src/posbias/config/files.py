"""The files a config names: each dataset's files, which must exist, and optional datasets dropped when theirs do not.
"""

from __future__ import annotations

from pathlib import Path

from posbias.config.params import sorted_keys
from posbias.errors import PosbiasError
from posbias.textfiles import require_file

FILE_KEYS = ("path", "topics", "qrels", "corpus", "answers", "candidates")  # a dataset's keys naming files


# What a dataset entry says about other stages (which retrievers run on it, their prebuilt indexes,
# whether it may be skipped, which consumer reads its scores and the gold answers, read by the
# `answers` job): not read by the data stage, so editing them reruns no data job.
_NOT_DATA_KEYS = ("retrievers", "prebuilt", "optional", "consumer", "answers")


def named_files(spec: dict) -> list[tuple[str, str, str]]:
    """(config key, what it is, path) of every local file a dataset entry names, as the data stage reads
    them (a BEIR folder's three files); none for ir_datasets (keyed by id) and the generated sources."""
    if spec["source"] == "beir":
        root = Path(spec["path"])
        return [("path", "corpus", str(root / "corpus.jsonl")), ("path", "queries", str(root / "queries.jsonl")),
                ("path", "qrels", str(root / "qrels" / f"{spec['split']}.tsv"))]
    whats = {"path": spec["source"], "topics": "topics", "qrels": "qrels", "corpus": "corpus", "answers": "answers",
             "candidates": "candidates"}
    return ([(k, whats[k], spec[k]) for k in FILE_KEYS if k in spec]
            + [(f"runs.{name}", "run", r["path"]) for name, r in spec.get("runs", {}).items()])


def dataset_files(spec: dict) -> list[str]:
    """The local files a dataset entry names (:func:`named_files`) but its gold answers: the inputs of
    its data jobs (the answers are the ``answers`` job's)."""
    return [path for key, _, path in named_files(spec) if key != "answers"]


def qrels_file(spec: dict) -> str | None:
    """The qrels file of a dataset whose judgements are a file of their own (trec, imported, beir), so
    they are prepared by a job of their own (rule ``prepare_qrels``) and editing a grade does not
    rewrite the corpus (and re-index); None where the judgements come with the texts (an ir_datasets
    id, a generated or listwise set) or decide them (``sample_queries`` samples judged queries)."""
    if spec.get("sample_queries"):
        return None
    return next((path for _, what, path in named_files(spec) if what == "qrels"), None)


def text_files(spec: dict) -> list[str]:
    """The files the data job of a dataset reads for its corpus and queries: all but its own qrels file."""
    return [path for path in dataset_files(spec) if path != qrels_file(spec)]


def check_files(config: dict) -> None:
    """Every local file the datasets name exists and is a file: refused before any job otherwise (the
    same one-line messages the data stage would give, naming the config key)."""
    for name, spec in config["datasets"].items():
        if spec["source"] == "beir":
            root = Path(spec["path"]).expanduser()
            qrels = root / "qrels"
            if not root.is_dir():
                raise ValueError(f"config: datasets.{name}.path: BEIR folder {spec['path']} does not exist")
            if not (qrels / f"{spec['split']}.tsv").is_file():
                found = sorted(p.name for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
                raise ValueError(f"config: datasets.{name}: BEIR folder {spec['path']} has no qrels/{spec['split']}.tsv "
                                 f"(found {found or 'no qrels folder'}); add the qrels or set `split` to one that exists")
        for key, what, path in named_files(spec):
            try:
                require_file(path, what, f"datasets.{name}.{key}")
            except PosbiasError as exc:
                raise ValueError(f"config: {exc}") from None


def data_settings(spec: dict) -> dict:
    """The keys of a dataset entry the data stage reads."""
    return sorted_keys({k: v for k, v in spec.items() if k not in _NOT_DATA_KEYS})


def drop_unavailable(config: dict) -> list[str]:
    """Remove ``optional`` datasets whose local files are missing (and experiments on them); return their names."""
    dropped = []
    for name, spec in list(config["datasets"].items()):
        if not spec.get("optional"):
            continue
        if any(not Path(f).expanduser().exists() for f in dataset_files(spec)):
            dropped.append(name)
            del config["datasets"][name]
    rr = config.get("reranking", {})
    rr["experiments"] = [e for e in rr.get("experiments", []) if e["dataset"] not in dropped]
    return dropped
