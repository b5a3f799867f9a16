"""A figure's panels, cut from its PNG, for a phone: stacked one under the other, each shown
at the width it is drawn for, so its text stays legible (a two-panel figure scaled into a
phone's column showed its smallest text at 6-7 CSS px).

The cut needs the image and its grid (`plotting.legibility`'s panel widths: how many columns,
so how many rows): panels of the book's figures sit on a grid separated by blank gutters.
Rows are cut at the widest full-width blank band near each expected boundary, then each row
at the widest full-height blank column near its own; a figure whose gutters are not found is
shown whole, as is a figure of one panel."""

from __future__ import annotations

import io

MIN_GUTTER_PX = 3  # a blank band at least this wide can separate two panels
WINDOW = 0.15  # a cut is looked for within this share of the size around where it is expected
WIDE_PX = 920  # a one-panel figure wider than 4.6 inches (at 200 dpi) is cut for a phone
SIDE = (0.5, 0.95)  # where a one-panel figure's legend or colorbar may begin (share of width)
PAD_PX = 8  # blank kept around a trimmed piece
BLANK = 250  # a grey level at least this is the figure's (white) background


def _gutter(blank, expected: float, size: int, window: float = WINDOW) -> int | None:
    """The middle of the widest blank run of `blank` (1-D) within `window` * size of
    `expected`, or None where there is none."""
    lo, hi = int(expected - window * size), int(expected + window * size)
    best, start = None, None
    for i in range(max(lo, 0), min(hi, size) + 1):
        inside = i < min(hi, size) and blank[i]
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            if i - start >= MIN_GUTTER_PX and (best is None or i - start > best[1] - best[0]):
                best = (start, i)
            start = None
    return None if best is None else (best[0] + best[1]) // 2


def _cuts(blank, parts: int, size: int) -> list[int] | None:
    """Edges cutting 0..size into `parts` pieces at blank gutters near equal shares."""
    edges = [0]
    for k in range(1, parts):
        cut = _gutter(blank, k * size / parts, size)
        if cut is None or cut <= edges[-1]:
            return None
        edges.append(cut)
    return edges + [size]


def _trim(blank, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    ink = ~blank[y0:y1, x0:x1]
    rows, cols = ink.any(axis=1).nonzero()[0], ink.any(axis=0).nonzero()[0]
    if not len(rows):
        return box
    h, w = blank.shape
    return (
        int(max(0, x0 + cols[0] - PAD_PX)),
        int(max(0, y0 + rows[0] - PAD_PX)),
        int(min(w, x0 + cols[-1] + 1 + PAD_PX)),
        int(min(h, y0 + rows[-1] + 1 + PAD_PX)),
    )


def _unspanned(blank, y0: int, y1: int, cuts: list[int]) -> tuple[int, int]:
    """The rows of y0..y1 between the lines of ink that cross a cut at its top (a title of
    the whole figure, left out of the phone's pieces: the caption says it) and at its bottom
    (a legend below both panels, which the last piece keeps)."""
    skip = ~blank[y0:y1][:, cuts].all(axis=1) | blank[y0:y1].all(axis=1)
    top, bottom = y0, y1
    while top < y1 and skip[top - y0]:
        top += 1
    while bottom > top and skip[bottom - 1 - y0]:
        bottom -= 1
    return top, bottom


def _beside(png: bytes) -> list[tuple[int, int, int, int]]:
    """A one-panel figure too wide for a phone's column cut where what stands beside its axes
    (a legend, a colorbar) begins: the widest full-height blank column in SIDE of its width,
    the axes' own bottom line keeping the cut out of the plot."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        grey = np.asarray(image.convert("L"))
    blank = grey >= BLANK
    h, w = blank.shape
    lo, hi = SIDE
    cut = _gutter(blank.all(axis=0), (lo + hi) / 2 * w, w, window=(hi - lo) / 2)
    if cut is None:
        return []
    return [_trim(blank, (0, 0, cut, h)), _trim(blank, (cut, 0, w, h))]


def panel_boxes(png: bytes, panels: list[float]) -> list[tuple[int, int, int, int]]:
    """Pixel boxes (x0, y0, x1, y1) of the panels of a figure's PNG, row by row. `panels`:
    each panel's width as a share of the figure (`plotting.legibility`): 0.5 is one of two
    columns. A figure of one panel: its axes and what stands beside them (`_beside`). Empty
    where no gutter is found."""
    import numpy as np
    from PIL import Image

    if len(panels) < 2:
        return _beside(png) if Image.open(io.BytesIO(png)).width > WIDE_PX else []
    columns = max(1, round(1 / max(panels)))
    rows = -(-len(panels) // columns)
    with Image.open(io.BytesIO(png)) as image:
        grey = np.asarray(image.convert("L"))
    blank = grey >= BLANK
    h, w = blank.shape
    row_edges = _cuts(blank.all(axis=1), rows, h)
    if row_edges is None:
        return []
    boxes = []
    for row, (y0, y1) in enumerate(zip(row_edges, row_edges[1:])):
        # the last row holds what is left, centred (plotting._wrapped): one panel is one piece
        count = min(columns, len(panels) - row * columns)
        if count == 1:
            boxes.append(_trim(blank, (0, y0, w, y1)))
            continue
        # columns are cut on the middle of the row, the panels' bodies: a title of the whole
        # figure above them, or a legend below, may span the gutter
        core = slice(y0 + (y1 - y0) // 5, y1 - (y1 - y0) // 5)
        col_edges = _cuts(blank[core].all(axis=0), columns, w)
        if col_edges is None:
            return []
        top, bottom = _unspanned(blank, y0, y1, col_edges[1:-1])
        for x0, x1 in zip(col_edges, col_edges[1:]):
            if (~blank[top:bottom, x0:x1]).any():  # the empty slot of a centred last row
                boxes.append(_trim(blank, (x0, top, x1, bottom)))
    return boxes if len(boxes) > 1 else []


def crop(png: bytes, box: tuple[int, int, int, int]) -> bytes:
    """The PNG of one box of `png`."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        out = io.BytesIO()
        image.crop(box).save(out, format="PNG", optimize=True)
    return out.getvalue()
