"""Which of a run's datasets, retrievers and models are the papers' (``config/reproduction/identities.yaml``).

A paper figure names a collection, a first stage and a model in the papers' own terms; a run's config
names its own. They are matched by what they are, never by what they are called, so a figure is
compared only with a run of the same thing, and a tiny model or the toy is never compared with a paper:

- a **collection** by its ir_datasets id, or by the digest of its qrels as their reader reads them
  (:func:`posbias.data.local.content_digest`: the same judgements under any file name), or, for a
  listwise training set, by its file name and format;
- a **first stage** by its retriever kind and encoder (an HF id), or by an imported run's name;
- a **model** by its weights: an HF id (an external model), or a training recipe (method,
  augmentation, the HF id of the model it starts from, and any hyper-parameters the paper fixes). A
  recipe trained with several seeds is one variant; several variants may fit (the first whose results
  a figure needs are all in the run is compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from posbias import config as pbconfig
from posbias.data.local import content_digest


@dataclass(frozen=True)
class Names:
    """The papers' names resolved to a run's: per paper collection the run's datasets; per (run
    dataset, paper first stage) the run's retriever; per paper model its variants, each a list of
    seed models."""

    datasets: dict[str, list[str]]
    retrievers: dict[tuple[str, str], str]
    models: dict[str, list[list[str]]]
    groups: dict[str, list[str]]

    def collections(self, name: str | list[str]) -> list[str]:
        """A condition's ``dataset``: one collection, a list of them, or a group's name."""
        if isinstance(name, list):
            return name
        return self.groups.get(name, [name])


def load(path: str | Path) -> dict:
    """The identities file as a dict (sections ``collections``, ``groups``, ``retrievers``, ``models``);
    ValueError with one line for a file that is missing or not YAML."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"reproduction.identities: cannot read {path} ({str(exc).splitlines()[0]}); point it at "
                         "an identities file (the default: config/reproduction/identities.yaml)") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: the identities file needs the mappings `collections:`, `retrievers:`, `models:`")
    for section in ("collections", "retrievers", "models"):
        if not isinstance(doc.get(section), dict):
            raise ValueError(f"{path}: needs a mapping `{section}:`")
    return doc


def _qrels_digest(spec: dict) -> str | None:
    path = pbconfig.qrels_file(spec)
    return content_digest(path, "qrels") if path else None


def _is_collection(spec: dict, ident: dict) -> bool:
    if spec["source"] == "irds" and spec.get("id") in ident.get("irds", ()):
        return True
    if "qrels" in ident and _qrels_digest(spec) == ident["qrels"]:
        return True
    listwise, hf = ident.get("listwise"), ident.get("hf")
    if listwise and spec["source"] == "listwise":
        return spec.get("format") == listwise["format"] and Path(spec.get("path", "")).name in listwise["names"]
    return bool(hf) and spec["source"] == "hf_responses" and (spec.get("id"), spec.get("split")) == (hf["id"], hf["split"])


def _model_path(config: dict, ref: str | None) -> str | None:
    """An encoder's weights: a models entry's path, or the HF id the retriever names itself."""
    return config["models"].get(ref, {}).get("path", ref) if ref else None


def _is_retriever(config: dict, retriever: str, ident: dict) -> bool:
    if retriever.startswith(pbconfig.IMPORTED_PREFIX):
        return retriever.removeprefix(pbconfig.IMPORTED_PREFIX) in ident.get("imported", ())
    spec = config["retrievers"][retriever]
    if spec["kind"] not in ident.get("kinds", ()):
        return False
    return "models" not in ident or _model_path(config, spec.get("model")) in ident["models"]


def _root_path(config: dict, model: str) -> str:
    """The weights a model starts from: a trained model's base, followed to an external model."""
    training = config.get("training", {})
    while model in training:
        model = training[model]["base_model"]
    return config["models"][model].get("path", "")


def _variants(config: dict, ident: dict) -> list[list[str]]:
    """The run's variants (each its seed models, in config order) that are this paper model."""
    training = config.get("training", {})
    if "paths" in ident:
        return [[name] for name, spec in config["models"].items()
                if not spec.get("trained") and spec.get("path") in ident["paths"]
                and all(spec.get(k) == v for k, v in ident.get("settings", {}).items())]
    variants: dict[str, list[str]] = {}
    for name, run in training.items():
        if run["method"] != ident["method"] or ident.get("aug", run.get("aug")) != run.get("aug"):
            continue
        if _root_path(config, name) not in ident["base"]:
            continue
        if any(run.get("hyper", {}).get(k) != v for k, v in ident.get("hyper", {}).items()):
            continue
        variants.setdefault(pbconfig.variant_of(training, name), []).append(name)
    return list(variants.values())


def resolve(config: dict, identities: dict) -> Names:
    """The papers' names in a run's config (after :func:`posbias.config.prepare`: seeds expanded,
    trained models registered)."""
    datasets = {name: [d for d, spec in config["datasets"].items() if _is_collection(spec, ident)]
                for name, ident in identities["collections"].items()}
    retrievers = {}
    for dataset in config["datasets"]:
        for name, ident in identities["retrievers"].items():
            found = [r for r in pbconfig.dataset_retrievers(config, dataset) if _is_retriever(config, r, ident)]
            if found:
                retrievers[(dataset, name)] = found[0]
    models = {name: _variants(config, ident) for name, ident in identities["models"].items()}
    return Names(datasets, retrievers, models, dict(identities.get("groups", {})))
