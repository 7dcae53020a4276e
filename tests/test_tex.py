"""The `.tex` tables typeset with pdflatex: a table holding every character the writer maps, LaTeX's special
characters and a Chinese quote compiles (tests/tex.py installs Debian's TeX Live; the default run's own tables are
typeset in tests/test_run_default.py)."""

import polars as pl

from posbias.paper.writers import _LATEX_SYMBOLS, _SPECIAL, Table, write
from tests.tex import typeset


def test_a_table_of_every_mapped_character_compiles(tmp_path):
    symbols = "".join(_LATEX_SYMBOLS)
    special = "".join(_SPECIAL)
    view = pl.DataFrame({"model": [f"first {symbols}", f"a_b {special}", "ocsft"],
                         "nDCG@10": ["0.498 ± 0.010", "−0.013†", "–"], "τ-PSI": ["0.489", "0.5", "1"]})
    notes = f"λ = 0.1, α ≤ 2, 100% of 43 queries; the paper: “打乱输入顺序” {symbols} {special}"
    write(Table(view, view, notes), tmp_path / "every", f"Title with τ, λ and {special}")
    pdf = typeset([tmp_path / "every.tex"], tmp_path / "tex")
    assert pdf.stat().st_size > 1000


def test_a_table_without_columns_is_written_as_one_cell_that_compiles(tmp_path):
    """A builder that got no rows and said nothing (a view without columns: "|  |" in Markdown, an empty
    tabular pdflatex refuses) is written as one cell."""
    empty = pl.DataFrame()
    write(Table(empty, empty, "notes"), tmp_path / "empty", "Nothing here")
    assert "| rows |" in (tmp_path / "empty.md").read_text()
    typeset([tmp_path / "empty.tex"], tmp_path / "tex")
