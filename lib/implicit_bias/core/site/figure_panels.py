"""A figure's panels, cut from its PNG, for a phone: stacked one under the other, each shown
at the width it is drawn for, so its text stays legible (a two-panel figure scaled into a
phone's column showed its smallest text at 6-7 CSS px).

The cut needs the image and its grid (`plotting.legibility`'s panel widths: how many columns,
so how many rows): panels of the book's figures sit on a grid separated by blank gutters.
Rows are cut at the widest full-width blank band near each expected boundary, then each row
at the widest full-height blank column near its own; a figure whose gutters are not found is
shown whole, as is a figure of one panel.

That cut is a guess from the pixels, and it can slice a text that crosses a gutter (a title
of the whole figure, a panel's long title or its neighbour's y label). Where the figure is
drawn (`core.chapter.figure_html`), its panels' boxes are known exactly (`geometry_boxes`, on
the figure tag); the website cuts by those (`cut_boxes`, `crop`), the guess only where a
figure has none."""

from __future__ import annotations

import io
from typing import Any

MIN_GUTTER_PX = 3  # a blank band at least this wide can separate two panels
WINDOW = 0.15  # a cut is looked for within this share of the size around where it is expected
WIDE_PX = 920  # a one-panel figure wider than 4.6 inches (at 200 dpi) is cut for a phone
SIDE = (0.5, 0.95)  # where a one-panel figure's legend or colorbar may begin (share of width)
PAD_PX = 8  # blank kept around a trimmed piece
BLANK = 250  # a grey level at least this is the figure's (white) background
# zlib's default level for a piece's PNG: `optimize` (level 9 and a search of filters) took 27 of
# the site build's 63 s (186 pieces) for files 3% smaller
PIECE_COMPRESSION = 6


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


Box = tuple[int, int, int, int]
GEOMETRY_PAD_PX = 6  # blank kept around a panel's box (its texts' boxes are exact)


def _union(boxes) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _overlap(a, b) -> float:
    return max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))


def geometry_boxes(fig, dpi: float) -> list[Box]:
    """The pixel boxes (x0, y0, x1, y1, y down) of the panels of `fig` saved at `dpi` (the
    layout `savefig` drew), row by row: each grid slot's axes (twins, insets, and the colorbars
    beside it) with all they draw (ticks, labels, title, legend). A figure-level text or legend
    above every panel (a title of the whole figure: the caption says it) is left out; one
    below them all (a shared legend) is a last piece of its own; one among them goes with the
    panel it overlaps most. Empty for a figure of one panel (`panel_boxes` cuts what stands
    beside it)."""
    original = fig.dpi
    fig.set_dpi(dpi)
    try:
        fig.draw_without_rendering()  # the layout at the saved resolution, as savefig drew it
        renderer = fig.canvas.get_renderer()
        height = renderer.height

        def pixels(bbox) -> Box:
            return (
                int(bbox.x0),
                int(height - bbox.y1),
                int(-(-bbox.x1 // 1)),
                int(-(-(height - bbox.y0) // 1)),
            )

        slots: dict[tuple, list[Box]] = {}
        loose = []  # colorbars and axes placed by hand: they join the nearest panel
        for ax in fig.get_axes():
            bbox = ax.get_tightbbox(renderer) if ax.get_visible() else None
            if bbox is None or bbox.width <= 0 or bbox.height <= 0:
                continue
            spec = ax.get_subplotspec()
            if spec is None or ax.get_label() == "<colorbar>":
                loose.append((ax.get_window_extent(renderer), pixels(bbox)))
                continue
            top = spec.get_topmost_subplotspec()  # twin axes share their panel's slot
            key = (top.rowspan.start, top.colspan.start, id(top.get_gridspec()))
            slots.setdefault(key, []).append(pixels(bbox))
        if len(slots) < 2:
            return []
        keys = sorted(slots)
        for frame, box in loose:
            cx, cy = (frame.x0 + frame.x1) / 2, height - (frame.y0 + frame.y1) / 2
            nearest = min(
                keys,
                key=lambda k: min(
                    (max(b[0] - cx, 0, cx - b[2]) + max(b[1] - cy, 0, cy - b[3])) for b in slots[k]
                ),
            )
            slots[nearest].append(box)
        boxes = [_union(slots[k]) for k in keys]
        top, bottom = min(b[1] for b in boxes), max(b[3] for b in boxes)
        below = []
        for artist in fig.get_children():
            if artist in fig.axes or artist is fig.patch or not artist.get_visible():
                continue
            if hasattr(artist, "get_text") and not artist.get_text().strip():
                continue
            extent = artist.get_window_extent(renderer)
            if extent.width <= 0 or extent.height <= 0:
                continue
            box = pixels(extent)
            if box[3] <= top + 1:
                continue  # a title of the whole figure
            if box[1] >= bottom - 1:
                below.append(box)
                continue
            k = max(range(len(boxes)), key=lambda i: _overlap(boxes[i], box))
            boxes[k] = _union([boxes[k], box])
        return boxes + ([_union(below)] if below else [])
    finally:
        fig.set_dpi(original)


def cut_boxes(boxes: list[Box], size: tuple[int, int]) -> list[Box]:
    """The pieces cut for `boxes` (`geometry_boxes`) from an image of `size`: each padded by
    GEOMETRY_PAD_PX, clipped to the image."""
    w, h = size
    pad = GEOMETRY_PAD_PX
    return [
        (max(0, x0 - pad), max(0, y0 - pad), min(w, x1 + pad), min(h, y1 + pad))
        for x0, y0, x1, y1 in boxes
    ]


def crop(image: Any, box: Box, own: Box | None = None, others: tuple[Box, ...] = ()) -> bytes:
    """The PNG of one box of `image` (a decoded PIL image: a figure cut in several pieces is
    decoded once). With `own` (the panel's exact box inside `box`) and `others` (the other
    panels' boxes): what of the others falls in the piece, outside its own box, is painted over
    with the figure's ground, so no stray ends of a neighbour's texts show in its margin."""
    piece = image.crop(box)
    if own is not None and others:
        ground: Any = image.getpixel((0, 0))  # the figure's ground (transparent: dark)
        w, h = piece.size

        def inside(b: Box) -> Box:  # `b` in the piece's pixels, clipped to it
            return (
                min(max(b[0] - box[0], 0), w),
                min(max(b[1] - box[1], 0), h),
                min(max(b[2] - box[0], 0), w),
                min(max(b[3] - box[1], 0), h),
            )

        mine = inside(own)
        kept = piece.crop(mine)
        for other in map(inside, others):
            if other[2] > other[0] and other[3] > other[1]:
                piece.paste(ground, other)
        piece.paste(kept, mine[:2])
    out = io.BytesIO()
    piece.save(out, format="PNG", compress_level=PIECE_COMPRESSION)
    return out.getvalue()
