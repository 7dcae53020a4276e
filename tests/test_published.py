"""The published study (docs/results/real-llms-first, written by ``python -m posbias.publish``): its files are
the ones its manifest hashed, it names a commit of this repository, and the README shows its numbers. CI's
rerun of a slice of it is in tests/test_run_default.py."""

from __future__ import annotations

import hashlib
import json
import subprocess

import polars as pl
import pytest

from tests.conftest import REPO

STUDY = REPO / "docs" / "results" / "real-llms-first"


def test_the_published_files_are_those_the_manifest_hashed():
    manifest = json.loads((STUDY / "MANIFEST.json").read_text())
    on_disk = {str(p.relative_to(STUDY)) for p in STUDY.rglob("*") if p.is_file()} - {"MANIFEST.json", "README.md"}
    assert set(manifest["files"]) == on_disk
    changed = [name for name, digest in manifest["files"].items()
               if hashlib.sha256((STUDY / name).read_bytes()).hexdigest() != digest]
    assert not changed, f"edited after publishing (publish again instead): {changed}"
    assert (STUDY / "config.yaml").read_text() == (REPO / "config" / "examples" / "real-llms-first.yaml").read_text()


def test_the_study_was_run_by_a_commit_of_this_repository():
    commit = json.loads((STUDY / "MANIFEST.json").read_text())["git_commit"]
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "--git-dir"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True)
    assert found.returncode == 0, f"{commit} is not an ancestor of HEAD"


def study_readme_rows() -> list[str]:
    """The README's study table, as the published tables give it."""
    rerank = {r["debias"]: r for r in pl.read_csv(STUDY / "tables" / "rerank.csv").to_dicts()}
    claims = {r["claim"]: r for r in pl.read_csv(STUDY / "tables" / "claims.csv").to_dicts()}
    plain = rerank["none"]

    def claim(name: str) -> str:
        r = claims[name]
        return f"{r['mark']} (effect {r['effect']:+.3f}, d_z {r['d_z']:+.2f}, p = {r['p']:.2g}, {r['queries']} queries)"

    def capcal(name: str) -> str:
        r = rerank[name]
        return (f"{r['ndcg10_original']:.3f}; {r['ndcg10_shuffled_mean']:.3f} ± {r['ndcg10_shuffled_sd']:.3f} "
                f"(α {r['capcal_alpha_mean']:.2f} ± {r['capcal_alpha_sd']:.2f}, at the cap {r['capcal_at_cap']:.0%})")

    return [
        f"| nDCG@10, first-stage order | {plain['ndcg10_original']:.3f} |",
        f"| nDCG@10, 3 shuffled orders (mean ± sd over orders) | {plain['ndcg10_shuffled_mean']:.3f} ± "
        f"{plain['ndcg10_shuffled_sd']:.3f} |",
        f"| τ-PSI over the shuffles | {plain['tau_psi']:.3f} |",
        f"| nDCG@10 of the relevant passage at input position 1 / 20 (PSI) | {plain['curve_first']:.3f} / "
        f"{plain['curve_last']:.3f} ({plain['psi']:.3f}) |",
        f"| PermSC@2, PermSC@3 (nDCG@10) | {rerank['permsc@2']['ndcg10_original']:.3f}, "
        f"{rerank['permsc@3']['ndcg10_original']:.3f} |",
        f"| CapCal, c = α_max = 1 (ours): first-stage order; shuffled | {capcal('capcal')} |",
        f"| CapCal, c = 5, α_max = 2 (released code): first-stage order; shuffled | {capcal('capcal@released')} |",
        *(f"| claim: {name} | {claim(name)} |" for name in sorted(claims)),
    ]


def test_the_readme_shows_the_published_studys_numbers():
    readme = (REPO / "README.md").read_text()
    missing = [row for row in study_readme_rows() if row not in readme]
    assert not missing, "README.md's study table is not the published one; it gives:\n" + "\n".join(missing)
