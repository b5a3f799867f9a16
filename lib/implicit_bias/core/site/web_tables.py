"""The chapters' data tables (pandas HTML) laid out to fit the website's text column.

The column of a chapter page is 676 CSS px wide in a 1280 px window (the theme's sidebars take
the rest). A pandas table of many columns is wider than that: 20 of 93 were in the smoke book,
and scrolled inside their output. When the website is built (`website.externalize`), a table
estimated wider than `COLUMN_PX` is laid out again, every cell and value kept as pandas printed
it (nothing is rounded or dropped; the notebook's own output is unchanged):

- a table of at most `TRANSPOSE_MAX_ROWS` rows and one index level is transposed: its columns
  become rows (a record of many fields reads down a page better than across it);
- any other is cut into column groups stacked one under the other, each repeating the row
  labels (the index and the leading key columns, such as `method`, `H`, `seed`), so every row
  of every group says which row it is.

Widths are estimated from the text (`ESTIMATE`: characters at the table's font size, the
padding of a cell), conservatively; tests/test_website.py measures the result in Chromium.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

COLUMN_PX = 640  # the 676 px column less a margin for the estimate's error
TRANSPOSE_MAX_ROWS = 4
CHAR_PX, CELL_PAD_PX = 7.6, 12.0  # 0.8em of the theme's 16 px font; 0.4em padding a side, border
MAX_KEY_SHARE = 0.45  # key columns repeated in every group take at most this share of the width

TABLE = re.compile(r"(<table[^>]*class=\"dataframe[^\"]*\"[^>]*>)(.*?)</table>", re.S)
SECTION = re.compile(r"<(thead|tbody)>(.*?)</\1>", re.S)
ROW = re.compile(r"<tr([^>]*)>(.*?)</tr>", re.S)
CELL = re.compile(r"<(th|td)([^>]*)>(.*?)</\1>", re.S)
SPAN = re.compile(r"\b(colspan|rowspan)=\"(\d+)\"")
# a number as `readable_value` writes it in powers of ten: `3.8 × 10⁻¹⁶`, `10⁵`
POWER = r"[-+]?(?:\d+\.?\d* × )?10⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+"
NUMBER = re.compile(
    r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?|[-+]?inf|NaN|nan|True|False|yes|no|n/a|" + POWER
)
FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+|NaN|nan|" + POWER)


@dataclass
class Cell:
    tag: str
    attrs: str
    inner: str

    def html(self) -> str:
        return f"<{self.tag}{self.attrs}>{self.inner}</{self.tag}>"

    @property
    def text(self) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", self.inner)).strip()

    def span(self, kind: str) -> int:
        found = [int(n) for k, n in SPAN.findall(self.attrs) if k == kind]
        return found[0] if found else 1


def _cells(row: str) -> list[Cell]:
    return [Cell(*m.groups()) for m in CELL.finditer(row)]


def text_px(text: str, header: bool = False) -> float:
    """Estimated width of the widest piece of `text` that cannot wrap: text wraps at spaces,
    a header also after an underscore (`website.breakable_headers`)."""
    pieces = re.split(r"[\s_]+" if header else r"\s+", text) or [""]
    return max(len(p) for p in pieces) * CHAR_PX * (1.05 if header else 1.0) + CELL_PAD_PX


@dataclass
class Grid:
    """A pandas table: header rows (colspans expanded to one entry per column, each entry
    the cell it came from), body rows (their leading index cells verbatim, rowspans and all,
    and one cell per data column)."""

    opening: str
    head_attrs: list[str]
    corners: list[list[Cell]]
    head: list[list[Cell]]
    body_attrs: list[str]
    leads: list[list[Cell]]
    body: list[list[Cell]]
    n_lead: int

    @property
    def n_data(self) -> int:
        return len(self.head[0]) if self.head else 0

    def column_px(self) -> list[float]:
        widths = []
        for j in range(self.n_data):
            cells = [(c, True) for c in {id(r[j]): r[j] for r in self.head}.values()]
            cells = [(c, h) for c, h in cells if c.span("colspan") == 1]
            cells += [(r[j], False) for r in self.body]
            widths.append(max([text_px(c.text, h) for c, h in cells] or [CELL_PAD_PX]))
        return widths

    def lead_px(self) -> float:
        """The row labels' width: a row whose first labels span down from a row above has
        only its last ones (pandas' sparse MultiIndex), aligned to the right."""
        widths = [CELL_PAD_PX] * self.n_lead
        for row in self.corners + self.leads:  # labels break after an underscore too
            for i, cell in enumerate(row[-self.n_lead :] if self.n_lead else []):
                k = self.n_lead - len(row[-self.n_lead :]) + i
                widths[k] = max(widths[k], text_px(cell.text, header=True))
        return sum(widths) if self.n_lead else 0.0

    def estimated_px(self) -> float:
        return self.lead_px() + sum(self.column_px())


def parse(opening: str, content: str) -> Grid | None:
    """The grid of a pandas table, or None for a shape this module does not handle."""
    sections = dict((m.group(1), m.group(2)) for m in SECTION.finditer(content))
    if set(sections) != {"thead", "tbody"}:
        return None
    head_rows = [(m.group(1), _cells(m.group(2))) for m in ROW.finditer(sections["thead"])]
    body_rows = [(m.group(1), _cells(m.group(2))) for m in ROW.finditer(sections["tbody"])]
    if not head_rows:
        return None
    if body_rows:
        n_lead = _leading_th(body_rows[0][1])
    else:
        n_lead = _leading_th(head_rows[-1][1]) if len(head_rows) > 1 else 1
    corners, head = [], []
    for _, cells in head_rows:
        expanded = [c for c in cells for _ in range(c.span("colspan"))]
        corners.append(expanded[:n_lead])
        head.append(expanded[n_lead:])
    leads, body = [], []
    for _, cells in body_rows:
        k = _leading_th(cells)
        leads.append(cells[:k])
        body.append(cells[k:])
    n_data = len(head[0])
    spanning = any(c.span("colspan") > 1 for r in body for c in r)
    if spanning or any(len(r) != n_data for r in head + body):
        return None
    return Grid(
        opening,
        [a for a, _ in head_rows],
        corners,
        head,
        [a for a, _ in body_rows],
        leads,
        body,
        n_lead,
    )


def _leading_th(cells: list[Cell]) -> int:
    n = 0
    while n < len(cells) and cells[n].tag == "th":
        n += 1
    return n


def _header_html(row: list[Cell], columns: list[int]) -> str:
    """Header cells of `columns`, a cell spanning several of them merged again."""
    out, j = [], 0
    while j < len(columns):
        cell, k = row[columns[j]], j + 1
        while k < len(columns) and row[columns[k]] is cell and columns[k] == columns[k - 1] + 1:
            k += 1
        attrs = SPAN.sub("", cell.attrs).rstrip()
        span = f' colspan="{k - j}"' if k - j > 1 else ""
        out.append(f"<{cell.tag}{attrs}{span}>{cell.inner}</{cell.tag}>")
        j = k
    return "".join(out)


def _table(grid: Grid, columns: list[int], css: str, caption: str = "") -> str:
    opening = grid.opening
    if css:
        opening = opening.replace('class="dataframe', f'class="dataframe {css}', 1)
    if caption:
        opening += f"<caption>{caption}</caption>"
    shown = list(range(grid.n_lead)) + [grid.n_lead + j for j in columns]
    head = "".join(
        f"<tr{attrs}>{_header_html(corner + row, shown)}</tr>"
        for attrs, corner, row in zip(grid.head_attrs, grid.corners, grid.head, strict=True)
    )
    body = "".join(
        f"<tr{attrs}>" + "".join(c.html() for c in lead + [row[j] for j in columns]) + "</tr>"
        for attrs, lead, row in zip(grid.body_attrs, grid.leads, grid.body, strict=True)
    )
    return f"{opening}<thead>{head}</thead><tbody>{body}</tbody></table>"


def _is_number(text: str) -> bool:
    return bool(NUMBER.fullmatch(text.replace(",", "")))


def key_columns(grid: Grid) -> int:
    """Leading data columns that label a row rather than measure it: none of their values is
    a fractional number (names, integers such as a seed or a width, booleans)."""
    widths, keys = grid.column_px(), 0
    budget = MAX_KEY_SHARE * COLUMN_PX - grid.lead_px()
    for j in range(grid.n_data - 1):
        texts = [row[j].text for row in grid.body]
        if any(FLOAT.fullmatch(t) for t in texts) or sum(widths[: j + 1]) > budget:
            break
        keys = j + 1
    return keys


def _greedy(widths: list[float], columns: range, fixed: float, capacity: float) -> list[list[int]]:
    groups: list[list[int]] = []
    current: list[int] = []
    used = fixed
    for j in columns:
        if current and used + widths[j] > capacity:
            groups.append(current)
            current, used = [], fixed
        current.append(j)
        used += widths[j]
    return groups + [current] if current else groups


def column_groups(grid: Grid) -> list[list[int]]:
    """Data columns cut into as few groups as fit `COLUMN_PX` with the row labels repeated,
    of about equal widths (no group of one column left over)."""
    widths, keys = grid.column_px(), key_columns(grid)
    fixed = grid.lead_px() + sum(widths[:keys])
    columns = range(keys, grid.n_data)
    groups = _greedy(widths, columns, fixed, COLUMN_PX)
    even = fixed + sum(widths[j] for j in columns) / len(groups) + max(widths[keys:] or [0])
    balanced = _greedy(widths, columns, fixed, min(COLUMN_PX, even))
    if len(balanced) == len(groups):
        groups = balanced
    return [list(range(keys)) + g for g in groups]


def group_captions(groups: list[list[int]], keys: int) -> list[str]:
    """Which columns a group shows: "columns 1–7 of 16", then "columns 8–12 of 16 (and 1–2
    again)" where the key columns are repeated."""
    n = groups[-1][-1] + 1
    again = f" (and {'1' if keys == 1 else f'1–{keys}'} again)" if keys else ""
    captions = []
    for i, g in enumerate(groups):
        first, last = (g[0] if i == 0 else g[keys]) + 1, g[-1] + 1
        shown = f"column {last}" if first == last else f"columns {first}–{last}"
        captions.append(f"{shown} of {n}{again if i else ''}")
    return captions


def transposable(grid: Grid) -> bool:
    """One index level, few rows, and one header row with the column names (a second one
    may only name the index); no cell spanning rows or columns."""
    labels = [r for r in grid.head if any(c.text for c in r)]
    spans = any("span=" in c.attrs for r in grid.head + grid.leads + grid.body for c in r)
    return (
        grid.n_lead == 1
        and 0 < len(grid.body) <= TRANSPOSE_MAX_ROWS
        and len(labels) == 1
        and not spans
        and all(len(lead) == 1 for lead in grid.leads)
    )


def transpose(grid: Grid) -> str:
    labels = next(r for r in grid.head if any(c.text for c in r))
    names = [c for corner in grid.corners for c in corner if c.text]
    corner = names[0].inner if names else ""
    head = f"<tr><th>{corner}</th>" + "".join(f"<th>{lead[0].inner}</th>" for lead in grid.leads)
    rows = "".join(
        f"<tr><th>{labels[j].inner}</th>" + "".join(row[j].html() for row in grid.body) + "</tr>"
        for j in range(grid.n_data)
    )
    css = f"book-transposed {_text_class(grid)}".strip()
    opening = grid.opening.replace('class="dataframe', f'class="dataframe {css}', 1)
    return f"{opening}<thead>{head}</tr></thead><tbody>{rows}</tbody></table>"


def numeric_share(grid: Grid, columns: list[int] | None = None) -> float:
    """The share of the data cells (of `columns`, default all) that hold a number; 0 for a
    table without any (a header alone is words)."""
    picked = range(grid.n_data) if columns is None else columns
    cells = [row[j].text for row in grid.body for j in picked if row[j].text]
    return sum(_is_number(t) for t in cells) / len(cells) if cells else 0.0


def _text_class(grid: Grid, columns: list[int] | None = None) -> str:
    return "book-text-table" if numeric_share(grid, columns) < 0.5 else ""


def fit_table(opening: str, content: str) -> str:
    """The table laid out to fit the column: as it is where it fits (or has a shape this
    module leaves alone), else transposed or cut into column groups. A table mostly of words,
    not numbers, gets the class `book-text-table`: on a phone its long words may wrap anywhere
    (book.css)."""
    grid = parse(opening, content)
    if grid is None:
        return f"{opening}{content}</table>"
    if grid.estimated_px() > COLUMN_PX:
        if transposable(grid):
            return transpose(grid)
        groups = column_groups(grid)
        if len(groups) > 1:
            captions = group_captions(groups, key_columns(grid))
            return "\n".join(
                _table(grid, g, f"book-column-group {_text_class(grid, g)}".strip(), caption)
                for g, caption in zip(groups, captions, strict=True)
            )
    css = _text_class(grid)
    if css:
        opening = opening.replace('class="dataframe', f'class="dataframe {css}', 1)
    return f"{opening}{content}</table>"


def fit_tables(text: str) -> tuple[str, int]:
    """Every pandas table of a page laid out to fit (`fit_table`); returns the page and the
    number of tables laid out again (transposed or cut into column groups)."""
    changed = 0

    def one(match: re.Match) -> str:
        nonlocal changed
        fitted = fit_table(match.group(1), match.group(2))
        changed += "book-transposed" in fitted or "book-column-group" in fitted
        return fitted

    return TABLE.sub(one, text), changed


# A chapter's long tables (per seed, per cell of a grid) are downloads, not pages of rows: a
# DataFrame of more than LONG_TABLE_ROWS rows displays as its size, a link to all of it as CSV
# (inlined in the notebook, a file beside the page on the website: `website.externalize`) and
# its first PREVIEW_ROWS rows and PREVIEW_COLUMNS columns, folded.
LONG_TABLE_ROWS, PREVIEW_ROWS, PREVIEW_COLUMNS = 20, 5, 6


SNAKE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9.]+)+$")  # `dist_l1`, `gd_error_step_0.4`


# Maths a program's column name spells in ASCII, as a reader reads it: a Greek letter's name
# as the letter (`eta=0.05` -> `η=0.05`, `cos zeta` -> `cos ζ`), `log10` and the norms `l1`,
# `l2` with their subscript and script l, `<=` and `>=` as signs.
GREEK = dict(
    zip(
        "alpha beta gamma delta epsilon zeta eta theta kappa lambda mu nu rho sigma tau".split(),
        "αβγδεζηθκλμνρστ",
    )
)
ASCII_MATHS = re.compile(r"\b(" + "|".join(GREEK) + r"|log10|l[12]|ell[12])\b|<=|>=")


def _maths_words(text: str) -> str:
    def letter(match: re.Match) -> str:
        word = match.group(1)
        if word is None:
            return "≤" if match.group(0) == "<=" else "≥"
        if word == "log10":
            return "log₁₀"
        if word[-1] in "12" and word[:-1] in ("l", "ell"):
            return "ℓ" + word[-1]
        return GREEK[word]

    return ASCII_MATHS.sub(letter, text)


def readable_label(label):
    """A column or row label as a reader reads it: a snake_case name in words (`median init`),
    its ASCII maths as signs (`_maths_words`: `eta=0.05` -> `η=0.05`), a float as
    `readable_value` writes it; any other label (an integer, a tuple's parts) as it is."""
    if isinstance(label, tuple):
        return tuple(readable_label(part) for part in label)
    if isinstance(label, str):
        return _maths_words(label.replace("_", " ") if SNAKE.match(label) else label)
    return readable_value(label)


SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
TINY = 1e-6  # below it a value is a residual, read for its order: two significant digits


def readable_value(value):
    """A value as a reader reads it: a float to four significant digits (`0.9821`), in powers
    of ten where pandas wrote an exponent (`1.235 × 10⁶`) and to two digits below TINY
    (`3.8 × 10⁻¹⁶`: pandas showed `3.777265e-16`), NaN as `n/a`; a boolean as `yes` / `no`;
    anything else as it is."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value != value:  # a value not measured here (a standard error of one seed)
            return "n/a"
        text = f"{value:.2g}" if 0 < abs(value) < TINY else f"{value:.4g}"
        mantissa, e, exponent = text.partition("e")
        if not e:
            return text
        power = f"10{str(int(exponent)).translate(SUPERSCRIPT)}"
        return power if mantissa == "1" else f"{mantissa} × {power}"
    return value


def readable_frame(frame):
    """`frame` as a chapter page shows it: labels in words, floats to four significant digits
    (the CSV download of a long table keeps every digit and the names a program reads)."""
    import pandas as pd

    shown = frame.map(readable_value) if len(frame.columns) else frame.copy()
    shown = shown.rename(columns=readable_label, index=readable_label)
    for axis in (shown.index, shown.columns):
        names = [readable_label(n) for n in axis.names]
        if isinstance(axis, pd.MultiIndex):
            axis.names = names
        else:
            axis.name = names[0]
    return shown


def _positional(index) -> bool:
    """Whether `index` is pandas' default 0, 1, 2, ...: row numbers, not labels a reader reads."""
    import pandas as pd

    return isinstance(index, pd.RangeIndex) and index.name is None and index.start == 0


def readable_html(frame, notebook: bool = True) -> str:
    """pandas' HTML table of `readable_frame(frame)`, without a default index's row numbers."""
    return readable_frame(frame).to_html(notebook=notebook, index=not _positional(frame.index))


def long_table_html(frame) -> str:
    """How a DataFrame displays in a chapter: a readable table (`readable_frame`) up to
    LONG_TABLE_ROWS rows, under the sentence that says what it holds where the notebook gives
    one (`frame.attrs["caption"]`: `Chapter.table`; the website folds a table of more than a few
    rows under it); longer, or whatever its length where the notebook calls it a download
    (`frame.attrs["about"]`: a per-seed table, say), that sentence (else its size), a CSV
    download of every row and a folded preview of the first rows."""
    caption = frame.attrs.get("caption")
    if len(frame) <= LONG_TABLE_ROWS and not frame.attrs.get("about"):
        said = (
            f"<p class='table-caption'>{html.escape(caption, quote=False)}</p>" if caption else ""
        )
        return said + readable_html(frame)
    import base64
    import hashlib

    csv = frame.to_csv(float_format="%.10g").encode()
    name = f"table-{hashlib.sha1(csv).hexdigest()[:10]}.csv"
    shown = frame.iloc[:PREVIEW_ROWS, :PREVIEW_COLUMNS]
    about = frame.attrs.get("about") or caption or f"A table of {len(frame):,} rows"
    rows = f"all {len(frame):,} rows" if len(frame) > 1 else "it"
    link = (
        f"<a download='{name}' href='data:text/csv;base64,{base64.b64encode(csv).decode()}'>"
        f"download {rows} as CSV</a>"
    )
    # the first rows and columns: a glimpse (the CSV has the rest)
    return (
        f"<p class='long-table'>{html.escape(about)}: {link}.</p>"
        f"<details class='table-fold'><summary>Its first rows</summary>"
        f"{readable_html(shown, notebook=False)}</details>"
    )


def install_long_tables() -> bool:
    """Display DataFrames (and Series, as one-column frames) with `long_table_html` in this
    IPython kernel (False outside one)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    import pandas as pd

    html_formatter = shell.display_formatter.formatters["text/html"]
    html_formatter.for_type(pd.DataFrame, long_table_html)
    # a Series shows as a table too, not as its text repr ("Name: runs, dtype: int64")
    html_formatter.for_type(pd.Series, lambda series: long_table_html(series.to_frame()))
    return True
