"""How every table and figure of the project is written.

A table is a :class:`Table`: ``data`` holds the numbers (the CSV), ``view`` the formatted cells
(strings, significance marks), ``notes`` what a reader needs beyond the cells (test, correction,
counts); :func:`write` writes ``<stem>.md``, ``.csv`` and ``.tex``. A figure is written by
:func:`save_figure` as PNG and PDF. Tables go to ``results/tables/``, figures to ``results/figures/``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from posbias import provenance
from posbias.atomic import replacing


@dataclass
class Table:
    data: pl.DataFrame
    view: pl.DataFrame
    notes: str


def view_or_none(view: list[dict], heading: str, why: str) -> pl.DataFrame:
    """A table's rows, or where it has none one cell under ``heading`` saying ``why`` (a table whose inputs
    this config does not produce still renders, and says what would fill it)."""
    return pl.DataFrame(view or [{heading: why}])


def fmt(value: float, digits: int = 4) -> str:
    """A number to `digits` decimals for a table cell; None or NaN as an en dash."""
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def fmt_sd(mean: float, sd: float, digits: int = 4) -> str:
    """``mean ± sd``, or just the mean when there is no spread to report (one seed)."""
    return fmt(mean, digits) if math.isnan(sd) else f"{fmt(mean, digits)} ± {fmt(sd, digits)}"


def write(table: Table, stem: str | Path, title: str) -> list[Path]:
    """``stem``.md (title, table, notes), ``stem``.csv (the numbers) and ``stem``.tex (booktabs); the
    Markdown and LaTeX end with what produced them (:func:`posbias.provenance.line`)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    # a builder whose config gave it nothing should say why (view_or_none); one that did not still writes a
    # table Markdown and pdflatex read, not one without columns
    view = table.view if table.view.columns else view_or_none([], "rows", "none in this run")
    lines = [f"# {title}", "", *markdown_rows(view)]
    origin = provenance.line()
    record = json.dumps(provenance.record(), sort_keys=True)
    lines += ["", table.notes, "", f"_{origin}_", "", f"<!-- {provenance.KEY} {record} -->", ""]
    md, csv, tex = stem.with_suffix(".md"), stem.with_suffix(".csv"), stem.with_suffix(".tex")
    latex = f"% {origin}\n" + _latex(view, title, table.notes)
    with replacing(md) as tmp_md, replacing(csv) as tmp_csv, replacing(tex) as tmp_tex:
        tmp_md.write_text("\n".join(lines))
        table.data.write_csv(tmp_csv)
        tmp_tex.write_text(latex)
    return [md, csv, tex]


def markdown_rows(view: pl.DataFrame) -> list[str]:
    """A GitHub Markdown table of ``view``'s cells as they are, a literal ``|`` in a cell escaped.

    Hand-written rather than tabulate's ``github`` format: tabulate pads every cell to its column's width, so a
    row could no longer be found by its cells (``| sim-grades (ref.) | none |``), which is how the tests, the docs'
    checks and ``posbias compare`` read these tables, and a wide column pads every row of the file."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, view.columns)) + " |", "|" + "---|" * len(view.columns)]
    return lines + ["| " + " | ".join(map(cell, row)) + " |" for row in view.iter_rows()]


# What pdflatex cannot typeset from UTF-8 without help, as the macros it can (math symbols need amssymb for the
# triangle). Hand-written: no well-kept library for it is in the lock (pylatexenc is not), and pandas' Styler
# escapes only LaTeX's special characters.
_LATEX_SYMBOLS = {
    "†": r"\textsuperscript{\dag}", "±": r"$\pm$", "→": r"$\rightarrow$", "–": "--", "—": "---", "−": r"$-$",
    "·": r"$\cdot$", "×": r"$\times$", "≤": r"$\leq$", "≥": r"$\geq$", "≈": r"$\approx$", "…": r"\ldots{}",
    "↑": r"$\uparrow$", "↓": r"$\downarrow$", "◀": r"$\blacktriangleleft$", "²": r"$^2$", "§": r"\S{}",
    "“": "``", "”": "''", "‘": "`", "’": "'", "é": r"\'e", "è": r"\`e", "ü": r'\"u', "ö": r'\"o', "ä": r'\"a',
    "α": r"$\alpha$", "β": r"$\beta$", "γ": r"$\gamma$", "δ": r"$\delta$", "Δ": r"$\Delta$", "ε": r"$\epsilon$",
    "λ": r"$\lambda$", "μ": r"$\mu$", "π": r"$\pi$", "ρ": r"$\rho$", "σ": r"$\sigma$", "τ": r"$\tau$",
    "ψ": r"$\psi$", "ω": r"$\omega$", "∅": r"$\emptyset$", "∞": r"$\infty$",
}
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+")  # the papers' Chinese quotes
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_PACKAGES = ("booktabs", "amssymb", "CJKutf8")  # what a document needs for every table here


def latex_text(text: str, escaped: bool = False) -> str:
    """``text`` as pdflatex typesets it: LaTeX's special characters escaped (unless already ``escaped``), the
    symbols of :data:`_LATEX_SYMBOLS` as macros, and runs of Chinese in a ``CJK`` environment (``CJKutf8``)."""
    if not escaped:
        text = "".join(_SPECIAL.get(ch, ch) for ch in text)
    text = "".join(_LATEX_SYMBOLS.get(ch, ch) for ch in text)
    return _CJK.sub(lambda m: r"\begin{CJK}{UTF8}{gbsn}" + m.group(0) + r"\end{CJK}", text)


_NUMBER = re.compile(r"^[\d.,+\-−±†%() ]+$")


def _numeric(column: pl.Series) -> bool:
    """Whether every cell of a view column reads as a number (a mean ± sd, a share, a † mark; "–" is empty)."""
    cells = [str(v) for v in column.to_list() if v is not None and str(v) not in ("–", "")]
    return bool(cells) and all(_NUMBER.match(c) for c in cells)


def _latex(view: pl.DataFrame, caption: str, notes: str) -> str:
    """A booktabs table through pandas' Styler (escaping, rules): the caption is the title, the notes a
    footnote-size paragraph under the table (not in ``\\caption``); every character one pdflatex typesets with
    :data:`LATEX_PACKAGES` (named in a comment on the first line)."""
    frame = view.to_pandas()
    styler = frame.style.hide(axis="index").format(escape="latex").format_index(escape="latex", axis=1)
    align = "".join("r" if _numeric(view[c]) else "l" for c in view.columns)  # numbers right-aligned
    body = styler.to_latex(hrules=True, caption="@@CAPTION@@", position_float="centering", convert_css=False,
                           column_format=align)
    body = latex_text(body, escaped=True)
    body = body.replace("@@CAPTION@@", latex_text(caption))
    return (f"% needs \\usepackage{{{','.join(LATEX_PACKAGES)}}}\n"
            + body.replace("\\end{table}", "\\par\\smallskip{\\footnotesize " + latex_text(notes) + "}\n\\end{table}"))


def pyplot():
    """matplotlib's pyplot on the Agg backend (jobs have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# Colours a reader tells apart with any colour vision (matplotlib's tableau-colorblind10 cycle), each line also
# with its own marker, so a figure printed in grey still reads.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def line_styles(n: int) -> list[dict]:
    """Colour and marker of each of ``n`` lines: the colour-blind-safe cycle, markers varied with them, shifted by
    one each time the colours come round, so no two of up to 100 lines share both."""
    import matplotlib.style

    colours = matplotlib.style.library["tableau-colorblind10"]["axes.prop_cycle"].by_key()["color"]
    return [{"color": colours[i % len(colours)], "marker": MARKERS[(i + i // len(colours)) % len(MARKERS)]}
            for i in range(n)]


def integer_x(axes) -> None:
    """Integer ticks on the x axis of each of ``axes``."""
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


MIN_Y_SPAN = 0.05  # the narrowest y axis of a panel of a metric on [0, 1] (nDCG@10, τ-PSI, retention Jaccard)


def min_y_span(ax, span: float = MIN_Y_SPAN, bounds: tuple[float, float] = (0.0, 1.0)) -> None:
    """Widen the y axis of ``ax`` to at least ``span`` around its data's middle, kept within ``bounds`` (the metric's
    range): matplotlib fits the axis to the data, so a difference of 0.0004 between two points would fill the panel
    and read as a large effect."""
    low, high = ax.get_ylim()
    if high - low < span:
        middle = min(max((low + high) / 2, bounds[0] + span / 2), bounds[1] - span / 2)
        ax.set_ylim(middle - span / 2, middle + span / 2)


def panels_with_legend(rows: int, panels: int, legend_columns: int, size: tuple[float, float]):
    """A figure of ``rows`` rows of ``panels`` panels, each ``size`` inches, and one more column holding each row's
    legend (``legend_columns`` columns of entries wide, its axes off), so a long legend never squeezes or covers
    the panels. Returns the figure, the panel axes (rows × panels) and the legend axes (one per row)."""
    width, height = size
    fig, axes = pyplot().subplots(rows, panels + 1, figsize=(width * panels + 3.4 * legend_columns, height * rows),
                                  squeeze=False, constrained_layout=True,
                                  gridspec_kw={"width_ratios": [1] * panels + [0.8 * legend_columns]})
    for legend_ax in axes[:, panels]:
        legend_ax.axis("off")
    return fig, axes[:, :panels], axes[:, panels]


def panels_by_group(rows: pl.DataFrame, keys: tuple[str, ...], columns: int = 2):
    """A figure with a row of ``columns`` panels per distinct value of ``keys`` in ``rows`` (one empty row where
    there is none), and per group its key, its rows and its row of axes."""
    groups = rows.select(*keys).unique(maintain_order=True).rows() if rows.height else []
    fig, axes = pyplot().subplots(max(len(groups), 1), columns, figsize=(5 * columns, 3.6 * max(len(groups), 1)),
                                  squeeze=False, constrained_layout=True)
    return fig, [(key, rows.filter(pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, key))), row)
                 for key, row in zip(groups, axes)]


def save_figure(fig, path: str | Path, dpi: int = 120) -> None:
    """Write ``fig`` as PNG at ``path`` and as PDF beside it (same stem), each with its provenance record
    (PNG text chunk, PDF subject), then close it."""
    import matplotlib.pyplot as plt

    record = f"{provenance.KEY} " + json.dumps(provenance.record(), sort_keys=True)
    with replacing(path) as png, replacing(Path(path).with_suffix(".pdf")) as pdf:
        fig.savefig(png, dpi=dpi, metadata={provenance.KEY: record[len(provenance.KEY) + 1:]})
        # no CreationDate: the same figure gives the same bytes (the record has no time stamp either)
        fig.savefig(pdf, metadata={"Subject": record, "CreationDate": None})
    plt.close(fig)
