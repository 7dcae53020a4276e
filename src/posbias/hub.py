"""The HF hub from a node that may have no network: fail in seconds, naming what to fetch and how.

huggingface_hub retries a hub it cannot reach (five tries with back-off for each file of each model),
so a compute node without network spends minutes per model before the load fails: the capcal preset's
``python -m posbias.dry_plan`` retried ``Qwen/Qwen2.5-7B-Instruct``'s ``config.json`` for over two
minutes here. Before a process first loads from the hub, :func:`settle` therefore probes the hub's
endpoint once (a TCP connection, a few seconds at most); where it cannot be reached it switches
huggingface_hub to offline mode, what ``HF_HUB_OFFLINE=1`` does: files come from the local cache or
not at all. :func:`require` then turns a model that is not cached into one line naming the model,
the config key and the command that fetches it on a login node.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

from posbias.errors import PosbiasError

log = logging.getLogger(__name__)
PROBE_S = 3.0  # seconds the probe may take (name lookup and connection each)


def _reachable(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout`` seconds. The name lookup runs in
    a thread: ``getaddrinfo`` has no timeout of its own, and a node without a resolver can hang in it."""
    found: list = []
    lookup = threading.Thread(target=lambda: found.append(_lookup(host, port)), daemon=True)
    lookup.start()
    lookup.join(timeout)
    if not found or found[0] is None:
        return False
    try:
        socket.create_connection(found[0], timeout=timeout).close()
    except OSError:
        return False
    return True


def _lookup(host: str, port: int):
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][:2]
    except OSError:
        return None


@functools.cache
def settle() -> bool:
    """True when this process works offline: ``HF_HUB_OFFLINE`` is set, or the hub's endpoint
    (``HF_ENDPOINT``, default huggingface.co) cannot be reached, in which case offline mode is switched
    on for the rest of the process. Probes once per process."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return True
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    if _reachable(url.hostname or "", port, PROBE_S):
        return False
    os.environ["HF_HUB_OFFLINE"] = "1"  # child processes and a later `import datasets` read it
    constants.HF_HUB_OFFLINE = True  # huggingface_hub and transformers read this at each call
    if "datasets" in sys.modules:  # HF datasets read the variable once, at import
        sys.modules["datasets"].config.HF_HUB_OFFLINE = True
    log.warning("the HF hub (%s) cannot be reached from this node: working offline, from the local cache (%s)",
                constants.ENDPOINT, constants.HF_HUB_CACHE)
    return True


def is_local(ref: str) -> bool:
    """Whether a model reference is a folder on disk rather than a hub id."""
    return ref.startswith((".", "/", "~")) or Path(ref).expanduser().is_dir()


def cached(model_id: str) -> bool:
    """Whether the local HF cache holds a snapshot of ``model_id`` (its ``config.json`` or, for a
    tokenizer-only repository, its ``tokenizer_config.json``)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return any(isinstance(try_to_load_from_cache(model_id, name), str)
                   for name in ("config.json", "tokenizer_config.json"))
    except ValueError:  # not a valid repository id (HFValidationError): nothing is cached under it
        return False


def fetch_hint(repo_id: str, repo_type: str = "model") -> str:
    """The command that puts ``repo_id`` into the cache this node reads, run where there is network."""
    from huggingface_hub import constants

    kind = "" if repo_type == "model" else f" --repo-type {repo_type}"
    return f"fetch it on a login node with `hf download{kind} {repo_id}` (cache {constants.HF_HUB_CACHE})"


def require(model_id: str | None, key: str) -> None:
    """Before loading ``model_id`` (read from config key ``key``) with ``from_pretrained``: offline and
    not cached is a PosbiasError in one line, at once, instead of a retry loop or the hub's ``OSError``.
    None (a simulated model, a retriever without a model) loads nothing."""
    if model_id is None or is_local(model_id) or not settle() or cached(model_id):
        return
    raise PosbiasError(f"{key}: model {model_id!r} is not in the local HF cache and the hub cannot be reached from "
                       f"this node; {fetch_hint(model_id)}")
