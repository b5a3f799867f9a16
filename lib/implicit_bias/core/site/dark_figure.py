"""A figure drawn again for the website's dark mode: the same figure, the same layout and size,
on a transparent ground, its greys turned over (black text and axes light, white frames dark)
and every colour kept that reads on the dark page; the light PNG (`plotting.save_figure`)
stays the figure's record and regression baseline.

Colours are judged by WCAG contrast against the page's dark background (the theme's
`--pst-color-background`): text at least TEXT_CONTRAST, lines, markers and edges at least
GRAPHIC_CONTRAST. A colormap (a heatmap, a colorbar, points coloured by a value) is kept."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.colors import ListedColormap, to_rgba

# pydata-sphinx-theme's dark mode: the page's background and its text
DARK_PAGE, DARK_TEXT = "#14181e", "#ced6dd"
TEXT_CONTRAST, GRAPHIC_CONTRAST = 4.5, 3.0  # WCAG: text (AA), graphical objects (1.4.11)
GREY_CHROMA = 0.12  # an RGB spread below this is a grey (black, "0.4", the grid's #b0b0b0)
KEPT_WHITE = 0.85  # a line or text this light is drawn on a heatmap, not on the page: kept
LISTED_MAX = 16  # a colormap of this few colours lists a plot's own (contour(colors="k"))


def luminance(rgb) -> float:
    """WCAG relative luminance of an sRGB colour (components 0..1)."""
    c = np.asarray(rgb, dtype=float)[:3]
    linear = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def contrast(a, b=DARK_PAGE) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((luminance(to_rgba(a)), luminance(to_rgba(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def on_dark(colour, minimum: float = GRAPHIC_CONTRAST, ground: bool = False) -> tuple:
    """`colour` for the dark page: a grey turned over (black to the page's text colour, white
    to the page's background, the greys between in proportion), a foreground white kept (it is
    drawn on an image), any other colour kept; a foreground then mixed with the least white
    that gives it a contrast of `minimum` with the page. `ground`: a background (a legend's
    frame, a box behind text), turned over whatever its lightness and never lightened. Alpha
    is kept."""
    r, g, b, a = to_rgba(colour)
    rgb = np.array([r, g, b])
    if rgb.max() - rgb.min() < GREY_CHROMA and (ground or rgb.mean() <= KEPT_WHITE):
        page, text = np.array(to_rgba(DARK_PAGE)[:3]), np.array(to_rgba(DARK_TEXT)[:3])
        rgb = text + (page - text) * rgb.mean()
    if not ground and contrast(rgb) < minimum:
        low, high = 0.0, 1.0  # the share of white: contrast grows with it
        for _ in range(20):
            mid = (low + high) / 2
            low, high = (low, mid) if contrast(rgb + (1 - rgb) * mid) >= minimum else (mid, high)
        rgb = rgb + (1 - rgb) * high
    return (*(float(c) for c in np.clip(rgb, 0, 1)), a)


def _light_grey(colour) -> bool:
    """A face of light grey or white: a ground (a box behind text, a band), turned dark."""
    rgb = np.array(to_rgba(colour)[:3])
    return bool(rgb.max() - rgb.min() < GREY_CHROMA and rgb.mean() > KEPT_WHITE)


def _collection(coll) -> None:
    """A collection's faces and edges; one coloured by value keeps its colormap, unless the
    map lists a plot's own few colours (`contour(colors="k")`: lines, not a heatmap)."""
    from matplotlib.contour import ContourSet

    if coll.get_array() is not None:
        cmap = coll.get_cmap()
        listed = isinstance(cmap, ListedColormap) and cmap.N <= LISTED_MAX
        if isinstance(coll, ContourSet) and listed and not coll.filled:
            mapped = [on_dark(c) for c in cmap(np.arange(cmap.N))]
            coll.set_cmap(ListedColormap(mapped, name=f"{cmap.name}-dark"))
        return
    faces, edges = coll.get_facecolor(), coll.get_edgecolor()
    if len(faces):
        coll.set_facecolor([on_dark(c, ground=_light_grey(c)) for c in faces])
    if len(edges):
        coll.set_edgecolor([on_dark(c) for c in edges])


def _artist(artist, frames: set[int]) -> None:
    """One artist recoloured (`on_dark`): a text, a line with its markers, a patch (a legend's
    frame, in `frames`, is a ground), a collection."""
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    if isinstance(artist, Text):
        artist.set_color(on_dark(artist.get_color(), TEXT_CONTRAST))
        box = artist.get_bbox_patch()
        if box is not None:
            box.set_facecolor(on_dark(box.get_facecolor(), ground=True))
            box.set_edgecolor(on_dark(box.get_edgecolor()))
    elif isinstance(artist, Line2D):
        artist.set_color(on_dark(artist.get_color()))
        for part in ("markerfacecolor", "markeredgecolor"):
            value = getattr(artist, f"get_{part}")()
            if not (isinstance(value, str) and value in ("none", "auto")):
                artist.set(**{part: on_dark(value)})
    elif isinstance(artist, Patch):
        face, edge = to_rgba(artist.get_facecolor()), to_rgba(artist.get_edgecolor())
        ground = id(artist) in frames
        if face[3] > 0:
            artist.set_facecolor(on_dark(face, ground=ground or _light_grey(face)))
        if edge[3] > 0:
            artist.set_edgecolor(on_dark(edge, ground=ground))
    elif isinstance(artist, Collection):
        _collection(artist)


GRID_CONTRAST = 1.0  # the grid is faint on purpose (alpha 0.3): turned over, not lightened


def _ticks(fig) -> tuple[list, set[int]]:
    """Each axis's tick colours for the dark page, (axis, "major" or "minor", settings), so
    that ticks a later draw makes take them too; and the ids of the grid's lines."""
    settings, grid = [], set()
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                ticks = axis.get_major_ticks() if which == "major" else axis.get_minor_ticks()
                grid |= {id(tick.gridline) for tick in ticks}
                if not ticks:
                    continue
                first = ticks[0]
                colours = {
                    "color": on_dark(first.tick1line.get_color()),
                    "labelcolor": on_dark(first.label1.get_color(), TEXT_CONTRAST),
                    # no alpha: an RGBA grid colour would replace the grid's alpha (0.3)
                    "grid_color": on_dark(first.gridline.get_color(), GRID_CONTRAST)[:3],
                }
                settings.append((axis, which, colours))
    return settings, grid


def recolour(fig) -> None:
    """Recolour `fig` in place for the dark page (`on_dark`), each artist once: texts, tick
    marks and labels, spines, grid, legend frames, lines, markers, patches and collections
    not coloured by value; the figure's and the axes' own grounds become transparent."""
    from matplotlib.legend import Legend
    from matplotlib.lines import Line2D

    settings, grid = _ticks(fig)
    grounds = [fig.patch, *(ax.patch for ax in fig.get_axes())]
    frames = {id(legend.legendPatch) for legend in fig.findobj(Legend)}
    seen = {id(ground) for ground in grounds}
    for artist in fig.findobj():
        if id(artist) in seen:
            continue
        seen.add(id(artist))
        if id(artist) in grid and isinstance(artist, Line2D):
            artist.set_color(on_dark(artist.get_color(), GRID_CONTRAST))
        else:
            _artist(artist, frames)
    for axis, which, colours in settings:
        axis.set_tick_params(which=which, **colours)
    for ground in grounds:
        ground.set_facecolor("none")


def dark_png(fig, dpi: float) -> bytes:
    """`fig`, already saved in light (its layout settled), recoloured (`recolour`) and
    rendered as PNG bytes at `dpi`: the same layout, so the same pixels in the same places.
    Changes `fig`: call it last."""
    fig.set_layout_engine("none")  # keep the layout of the light PNG, computed for its text
    recolour(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi, transparent=True, metadata={"Software": None})
    return out.getvalue()
