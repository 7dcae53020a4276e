"""How every table and figure of the project is written.

A table is a :class:`Table`: ``data`` holds the numbers (the CSV), ``view`` the formatted cells
(strings, significance marks), ``notes`` what a reader needs beyond the cells (test, correction,
counts); :func:`write` writes ``<stem>.md``, ``.csv`` and ``.tex``. A figure is written by
:func:`save_figure` as PNG and PDF. Tables go to ``results/tables/``, figures to ``results/figures/``.
"""

from __future__ import annotations

import json
import math
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
    view = table.view
    header = "| " + " | ".join(view.columns) + " |"
    lines = [f"# {title}", "", header, "|" + "---|" * len(view.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in view.iter_rows()]
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


def _latex(view: pl.DataFrame, caption: str, notes: str) -> str:
    """A booktabs table through pandas' Styler (escaping, rules), with the notes in the caption."""
    frame = view.to_pandas()
    styler = frame.style.hide(axis="index").format(escape="latex")
    return styler.to_latex(hrules=True, caption=f"{caption}. {notes}", position_float="centering",
                           convert_css=False).replace("†", r"\textsuperscript{\dag}").replace("±", r"$\pm$") \
        .replace("→", r"$\rightarrow$").replace("–", "--").replace("·", r"$\cdot$").replace("α", r"$\alpha$")


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
    """Colour and marker of each of ``n`` lines: the colour-blind-safe cycle, markers varied with them."""
    import matplotlib

    colours = matplotlib.style.library["tableau-colorblind10"]["axes.prop_cycle"].by_key()["color"]
    return [{"color": colours[i % len(colours)], "marker": MARKERS[i % len(MARKERS)]} for i in range(n)]


def integer_x(axes) -> None:
    """Integer ticks on the x axis of each of ``axes``."""
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


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
