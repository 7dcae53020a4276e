"""One-line config errors: a jsonschema error, a YAML syntax error or a duplicate key named by key, line and fix.
"""

from __future__ import annotations

import difflib
import re

from posbias.config.schema_defaults import schema


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def explain(error) -> str:
    """One line for a ``jsonschema.ValidationError`` raised while validating the config."""
    where = _dotted(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        prefix = "" if where == "(top level)" else f"{where}."
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            hints.append(f"{prefix}{key}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return (
            f"config: unknown key {', '.join(hints)}; allowed keys here: {', '.join(allowed)} "
            "(see config/README.md)"
        )
    if error.validator == "required":
        return f"config: {where} is missing a required key: {error.message} (see config/README.md)"
    hint = _yaml_number_hint(error)
    return f"config: {where}: {error.message}{hint} (see config/schema.yaml)"


_EXPONENT = re.compile(r"[-+]?\d+[eE][-+]?\d+")  # what YAML 1.1 leaves a string: no decimal point


def _yaml_number_hint(error) -> str:
    """Where a number was expected and YAML read a string such as ``1e-3`` (YAML 1.1, PyYAML's, reads
    an exponent without a decimal point as a string): how to write it so it is read as a number."""
    expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    if error.validator != "type" or not {"number", "integer"} & set(expected):
        return ""
    return exponent_hint(error.instance)


def exponent_hint(text) -> str:
    """``; YAML reads 1e-3 as a string: write 1.0e-3`` where ``text`` is such a string, else ``""`` (also
    for the compute plan's throughput table, which is YAML too)."""
    if not isinstance(text, str) or not _EXPONENT.fullmatch(text.strip()):
        return ""
    mantissa, exponent = re.split("[eE]", text.strip())
    return f"; YAML reads {text} as a string: write {mantissa}.0e{exponent}"


def explain_config(config: dict, schema: dict) -> str | None:
    """The most useful one-line message among all schema violations of ``config`` (None if valid).

    Unknown keys come first (a typo also makes a required key look missing), then missing keys.
    """
    import jsonschema

    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if not errors:
        return None
    flat = []
    while errors:
        error = errors.pop()
        flat.append(error)
        errors.extend(error.context or [])
    rank = {"additionalProperties": 0, "required": 1}
    flat.sort(key=lambda e: (rank.get(e.validator, 2), -len(e.absolute_path)))
    return explain(flat[0])


def check_duplicate_keys(paths) -> None:
    """A key written twice in one mapping of a YAML config file is an error (PyYAML keeps the last one
    silently); ValueError naming the file, both lines and the key."""
    import yaml

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` merges; an explicit key after it overrides on purpose
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise ValueError(f"config: {self.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice "
                                     f"in one mapping (first at line {seen[key]}); the last one would silently win: "
                                     "keep one")
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    for path in paths:
        with open(path, encoding="utf-8") as handle:
            try:
                yaml.load(handle, Loader=Strict)  # noqa: S506 (a SafeLoader subclass)
            except yaml.MarkedYAMLError as exc:
                raise ValueError(f"config: {yaml_syntax(path, exc)}") from None


def yaml_syntax(path, exc) -> str:
    """One line for a YAML syntax error: the file, the line and column where the parser gave up, what it
    found, and the usual causes."""
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    context = exc.context and (f"{exc.context} started at line {exc.context_mark.line + 1}" if exc.context_mark
                               else exc.context)
    what = "; ".join(str(part) for part in (context, exc.problem) if part)
    return (f"{where}: not valid YAML ({what}); check the indentation (spaces, no tabs) and the "
            "brackets and quotes of this line and the one before")
