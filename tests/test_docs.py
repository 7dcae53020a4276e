"""The README and the docs pages: every relative link resolves, and the quick start shows the config file it
runs (so neither can go stale). The numbers they show are checked by the tests of the runs that give them
(tests/test_published.py, tests/test_run_default.py, tests/test_workflow.py)."""

import re
from pathlib import Path

import pytest

from posbias import config as pbconfig
from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"


def test_the_readme_is_a_front_door():
    """About 150 lines: what it is, the real-model finding, two commands, a quick start, the cluster, links."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    for heading in ("## What a real model does", "## Two commands", "## Quick start", "## On a cluster",
                    "## Documentation"):
        assert heading in readme, heading


def test_the_quick_start_shows_the_config_it_runs_and_that_config_is_valid():
    readme = (REPO / "README.md").read_text()
    shown = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = REPO / "config" / "examples" / "quickstart.yaml"
    assert shown == path.read_text(), "README's quick start differs from config/examples/quickstart.yaml"
    assert len(shown.splitlines()) <= 25
    cfg = pbconfig.load(path, files=False)
    (experiment,) = cfg["reranking"]["experiments"]
    assert experiment["dataset"] == "dl20" and any(o.startswith("position-") for o in experiment["orders"])


def test_every_rule_says_what_it_does_in_snakemake_list_rules():
    """Each rule's first line is a one-line docstring, which `snakemake --list-rules` prints beside its name."""
    files = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    missing = []
    for path in files:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^rule \w+:$", line) and not re.match(r'^    """[^\n]+"""$', lines[i + 1]):
                missing.append(f"{path.name}: {line}")
    assert not missing, missing


def test_the_reports_captions_render_measure_names_as_text_not_mail_links():
    """Snakemake's HTML report renders each caption as reStructuredText, where a bare "nDCG@10" is an e-mail
    address (docutils' standalone hyperlinks): every "@" in a caption is escaped, so none becomes a link."""
    from docutils.core import publish_parts

    captions = sorted((REPO / "docs" / "captions").glob("*.rst"))
    assert captions
    for caption in captions:
        html = publish_parts(caption.read_text(encoding="utf-8"), writer_name="html",
                             settings_overrides={"report_level": 5})["fragment"]
        assert "mailto:" not in html, caption.name
    assert "mailto:" in publish_parts("nDCG@10", writer_name="html")["fragment"]  # what the escape prevents
