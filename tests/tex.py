"""Typeset the `.tex` tables with a real pdflatex (Debian's TeX Live, as a paper's build would)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# TeX Live's LaTeX with booktabs (latex-recommended), CJKutf8 and the gbsn font the papers' Chinese quotes use
PACKAGES = ("texlive-latex-base", "texlive-latex-recommended", "latex-cjk-common", "latex-cjk-chinese-arphic-gbsn00lp")


def ensure_pdflatex() -> str:
    """pdflatex's path; Debian's TeX Live installed first if missing (root only), the test skipped otherwise."""
    found = shutil.which("pdflatex")
    if found and _has_cjk():
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("typesetting the tables needs Debian's TeX Live (root installs it: " + " ".join(PACKAGES) + ")")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
        subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=900)
    return shutil.which("pdflatex")


def _has_cjk() -> bool:
    kpsewhich = shutil.which("kpsewhich")
    return bool(kpsewhich) and subprocess.run([kpsewhich, "CJKutf8.sty"], capture_output=True).returncode == 0


def typeset(tables: list[Path], workdir: Path) -> Path:
    """One article holding every table (each ``\\input`` on its own page, the packages its first line names),
    through pdflatex in batch mode; the PDF, or an assertion error with the first LaTeX error and its file."""
    needs = set()
    for table in tables:
        first = table.read_text().splitlines()[1]  # line 0: provenance; line 1: "% needs \usepackage{…}"
        needs |= set(re.fullmatch(r"% needs \\usepackage\{(.*)\}", first).group(1).split(","))
    workdir.mkdir(parents=True, exist_ok=True)
    body = "".join(f"\\input{{{table.resolve()}}}\n\\clearpage\n" for table in tables)
    (workdir / "tables.tex").write_text(f"\\documentclass{{article}}\n\\usepackage{{{','.join(sorted(needs))}}}\n"
                                        f"\\begin{{document}}\n{body}\\end{{document}}\n")
    out = subprocess.run([ensure_pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "tables.tex"],
                         cwd=workdir, capture_output=True, text=True, timeout=600)
    log = out.stdout
    error = next((i for i, line in enumerate(log.splitlines()) if line.startswith("!")), None)
    assert out.returncode == 0 and error is None, "\n".join(log.splitlines()[max(0, (error or 0) - 15):(error or 0) + 5])
    return workdir / "tables.pdf"
