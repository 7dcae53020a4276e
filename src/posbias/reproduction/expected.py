"""The papers' expected figures: ``config/reproduction/<paper>.yaml``, read and checked.

Each file lists the figures one paper reports that the workflow can compute: the words they come from
(``quote``, verbatim from the paper's text in ``../shared/papers/``; ``source`` instead for a published
baseline that is no paper of ours), where the paper states it, the condition it holds under (in the
names of ``config/reproduction/identities.yaml``), the statistic that computes it from a run's results
(:mod:`posbias.reproduction.statistics`), the claim (a value within a tolerance, or a bound) and the
reading it depends on where the paper is silent. pyserini's and rank_llm's reproduction matrices
("two-click reproductions") are the model: a YAML of conditions with their expected scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

from posbias.reproduction.statistics import STATISTICS

CLAIMS = {
    "value": "=",  # the run's value is within the tolerance of the paper's
    "at_least": "≥",  # the paper claims more than (or at least) its value
    "at_most": "≤",  # the paper claims less than (or at most) its value
}

_FIGURE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "where", "statistic", "condition", "value", "why"],
    "oneOf": [{"required": ["quote"]}, {"required": ["source"]}],
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$"},
        "where": {"type": "string", "description": "the table, figure or research question"},
        "quote": {"type": "string", "description": "the paper's words, verbatim"},
        "source": {"type": "string", "description": "a published baseline's citation (no paper of ours)"},
        "statistic": {"type": "string"},
        "condition": {"type": "object"},
        "claim": {"enum": list(CLAIMS), "default": "value"},
        "value": {"type": "number"},
        "unit": {"type": "string", "default": ""},
        "scale": {"type": "number", "exclusiveMinimum": 0, "default": 1,
                  "description": "the paper's unit per the run's (100: nDCG@10 in points)"},
        "tolerance": {"type": "number", "minimum": 0, "default": 0},
        "why": {"type": "string", "description": "the tolerance's reason"},
        "reading": {"type": "string", "description": "the reading of a point the paper leaves open"},
    },
}
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["paper", "figures"],
    "properties": {
        "paper": {"type": "string"},
        "texts": {"type": "array", "items": {"type": "string"},
                  "description": "the paper's files under ../shared/papers/, which hold every quote"},
        "figures": {"type": "array", "items": _FIGURE},
    },
}


@dataclass(frozen=True)
class Expected:
    """One figure a paper (or a published baseline) reports, with the condition it holds under."""

    id: str
    paper: str
    where: str
    statistic: str
    condition: dict
    value: float
    why: str
    claim: str = "value"
    unit: str = ""
    scale: float = 1.0
    tolerance: float = 0.0
    quote: str | None = None
    source: str | None = None
    reading: str | None = None
    texts: tuple[str, ...] = field(default=())

    def holds(self, measured: float) -> bool:
        """Whether ``measured`` (in the paper's unit) reproduces the figure."""
        if self.claim == "at_least":
            return measured >= self.value - self.tolerance
        if self.claim == "at_most":
            return measured <= self.value + self.tolerance
        return abs(measured - self.value) <= self.tolerance + 1e-9  # the paper's rounding, not float noise

    def stated(self) -> str:
        """The paper's figure as a claim: ``= 52.4 ± 0.5 points``, ``≥ 10 points``."""
        tol = f" ± {self.tolerance:g}" if self.claim == "value" and self.tolerance else ""
        return f"{CLAIMS[self.claim]} {self.value:g}{tol}{(' ' + self.unit) if self.unit else ''}"


def load(paths) -> list[Expected]:
    """Every figure of the files ``paths``, checked against :data:`SCHEMA` and the statistics' fields;
    ValueError with one line naming the file, the figure and the fix. Ids are unique across files."""
    out: list[Expected] = []
    seen: dict[str, str] = {}
    for path in map(Path, paths):
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"{path}: cannot read the expected figures ({str(exc).splitlines()[0]})") from None
        try:
            jsonschema.validate(doc, SCHEMA)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "the file"
            raise ValueError(f"{path}: {where}: {exc.message}") from None
        for entry in doc["figures"]:
            where = f"{path}: figure {entry['id']!r}"
            if entry["id"] in seen:
                raise ValueError(f"{where} is also in {seen[entry['id']]}; give each figure its own id")
            seen[entry["id"]] = str(path)
            if entry["statistic"] not in STATISTICS:
                raise ValueError(f"{where}: unknown statistic {entry['statistic']!r}; use one of {', '.join(STATISTICS)}")
            problem = STATISTICS[entry["statistic"]].check(entry["condition"])
            if problem:
                raise ValueError(f"{where}: condition: {problem}")
            out.append(Expected(paper=doc["paper"], texts=tuple(doc.get("texts", ())), **entry))
    return out
