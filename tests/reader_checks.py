"""What a reader of the built site must get, as measures Chromium runs on a page
(JavaScript that sets `result`, run by `test_website.measured`) and the functions that turn
their results into problems; the tests are in tests/test_website.py, each with a companion
that shows its check can fail."""

from __future__ import annotations

import re

# ---- figures not clipped: every figure image lies inside each ancestor that clips -----------
CLIPPING = (
    "result = [...document.querySelectorAll('figure.book-figure img')]"
    ".filter(i => i.getClientRects().length).map(i => {"
    "const r = i.getBoundingClientRect(); let left = Math.max(0, -r.left),"
    " right = Math.max(0, r.right - document.documentElement.clientWidth);"
    "for (let e = i.parentElement; e && e !== document.body; e = e.parentElement) {"
    "const s = getComputedStyle(e); if (s.overflowX === 'visible') continue;"
    "const b = e.getBoundingClientRect(); const inner = b.left + e.clientLeft;"
    "left = Math.max(left, inner - r.left);"
    "right = Math.max(right, r.right - (inner + e.clientWidth)); }"
    "return [i.getAttribute('src'), Math.round(left), Math.round(right)]; })"
)


def clipping_problems(page: str, width: int, figures: list) -> list[str]:
    """Figures cut off (more than a pixel) by the window or by an ancestor that clips."""
    return [
        f"{page} at {width} px: {src} cut by {left} px on the left, {right} px on the right"
        for src, left, right in figures
        if left > 1 or right > 1
    ]


# ---- dark mode: every visible text node against the background it is drawn on ---------------
# Colours are composited: a translucent text colour over its background, translucent
# backgrounds over those under them, down to the first opaque one (the page's, at worst).
CONTRAST = (
    "const rgba = s => { const c = (s.match(/[\\d.]+/g) || []).map(Number);"
    " return c.length === 3 ? [...c, 1] : c.length === 4 ? c : [0, 0, 0, 0]; };"
    "const over = (top, under) => { const a = top[3] + under[3] * (1 - top[3]);"
    " if (!a) return [0, 0, 0, 0];"
    " return [0, 1, 2].map(k => (top[k] * top[3] + under[k] * under[3] * (1 - top[3])) / a)"
    ".concat([a]); };"
    "const lum = c => { const f = v => { v /= 255;"
    " return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };"
    " return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };"
    "const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);"
    " return (x + 0.05) / (y + 0.05); };"
    "const background = el => { const layers = [];"
    " for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e)"
    ".backgroundColor); if (c[3] > 0) layers.push(c); if (c[3] >= 0.99) break; }"
    " let bg = rgba(getComputedStyle(document.documentElement).backgroundColor);"
    " if (bg[3] < 0.99) bg = over(bg, [255, 255, 255, 1]);"
    " for (const c of layers.reverse()) bg = over(c, bg); return bg; };"
    "const skip = 'script, style, noscript, template, mjx-assistive-mml, .visually-hidden,"
    " .sr-only, .headerlink';"
    "const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);"
    "let checked = 0; const low = [];"
    "for (let n = walker.nextNode(); n; n = walker.nextNode()) {"
    " const el = n.parentElement; if (!el || !n.textContent.trim() || el.closest(skip)) continue;"
    " if (!el.getClientRects().length) continue; const s = getComputedStyle(el);"
    " if (s.visibility !== 'visible' || parseFloat(s.opacity) === 0) continue;"
    " const bg = background(el); const fg = over(rgba(s.color), bg);"
    " const r = ratio(fg, bg); checked += 1;"
    " if (r < 4.5) low.push([n.textContent.trim().slice(0, 40), Math.round(r * 100) / 100,"
    " el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ')[0] : ''),"
    " fg.slice(0, 3).map(Math.round), bg.slice(0, 3).map(Math.round)]); }"
    "result = {checked: checked, low: low.slice(0, 40), lowCount: low.length,"
    " theme: document.documentElement.dataset.theme || ''}"
)
MIN_CONTRAST = 4.5  # WCAG AA for body text


def contrast_problems(page: str, found: dict) -> list[str]:
    """Text nodes below MIN_CONTRAST (as CONTRAST measured them; first few named)."""
    if not found["checked"]:
        return [f"{page}: no text measured"]
    return [
        f"{page}: {count} text nodes below {MIN_CONTRAST}:1, e.g. {found['low'][:3]}"
        for count in [found["lowCount"]]
        if count
    ]


# ---- the verdict first: a verdict box after the abstract, before the first figure ----------
VERDICT = (
    "const box = document.querySelector('aside.verdict-box');"
    "const figure = document.querySelector('figure.book-figure');"
    "const before = (a, b) => !!(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);"
    "const links = box ? [...box.querySelectorAll('li a[href^=\"#claim-\"]')]"
    ".map(a => a.getAttribute('href').slice(1)) : [];"
    "result = {box: !!box, figure: !!figure,"
    " before_figure: box && figure ? before(box, figure) : null,"
    " findings: box ? box.querySelectorAll('li').length : 0,"
    " counts: box ? box.querySelectorAll('.claim-status').length : 0,"
    " linked: links.filter(id => document.getElementById(id)).length, links: links.length}"
)
MIN_FINDINGS, MAX_FINDINGS = 3, 5
CLAIM_ROW = re.compile(r"<tr id=.claim-[\w-]+.>(.*?)</tr>", re.S)
APART = re.compile(r"book(?:'|&#x27;)s own check|an audit of")  # the row's own label


def paper_claim_rows(html: str) -> int:
    """The rows of a page's claims table that are claims of the paper: not labelled the book's
    own check or an audit (what the verdict box's findings are drawn from)."""
    return sum(not APART.search(row) for row in CLAIM_ROW.findall(html))


def verdict_problems(page: str, found: dict, claims: int) -> list[str]:
    """A chapter page without its verdict box first, or a box without counts or findings
    (3-5 where the chapter has that many claims, each linked to its row)."""
    if not found["box"]:
        return [f"{page}: no verdict box"]
    problems = []
    if found["figure"] and not found["before_figure"]:
        problems.append(f"{page}: the verdict box comes after the first figure")
    if not found["counts"]:
        problems.append(f"{page}: the verdict box shows no counts")
    want = min(MIN_FINDINGS, claims)
    if not want <= found["findings"] <= MAX_FINDINGS:
        problems.append(f"{page}: {found['findings']} findings (want {want}-{MAX_FINDINGS})")
    if found["linked"] != found["findings"] or found["links"] != found["findings"]:
        problems.append(f"{page}: {found['linked']} of {found['findings']} findings link a row")
    return problems


# ---- code folded: no cell's code is shown when the page opens -------------------------------
CODE_FOLDED = (
    "const inputs = [...document.querySelectorAll('article div.cell div.cell_input')];"
    "result = {cells: inputs.length, shown: inputs.filter(i =>"
    " !i.closest('details:not([open])') && i.checkVisibility()).length}"
)


def code_problems(page: str, found: dict) -> list[str]:
    if found["shown"]:
        return [f"{page}: {found['shown']} of {found['cells']} code cells shown unfolded"]
    return []


# Folded tables (the claims table, long data tables) are measured open, as a reader opens them:
# they must fit, and be readable, too. Code cells stay folded.
OPEN_FOLDS = (
    "const folds = [...document.querySelectorAll('details:not(.above-input)')];"
    "folds.forEach(d => { d.open = true; }); result = folds.length"
)


# ---- machinery off the page: no long table, printed dict or DataFrame repr -----------------
MAX_TABLE_ROWS = 20
LONG_TABLES = (
    "result = [...document.querySelectorAll('article table')]"
    ".filter(t => !t.classList.contains('claims-table'))"
    ".map(t => [t.closest('section') ? t.closest('section').id : '',"
    " t.querySelectorAll('tbody tr').length]).filter(([, n]) => n > 20)"
)
PRINTED = (
    "result = [...document.querySelectorAll('article div.cell_output pre')]"
    ".filter(p => p.getClientRects().length).map(p => p.textContent.trim().slice(0, 400))"
)
# A printed dict or list of records, pandas' text repr of a frame (its shape line, or its
# "..." rows) or of a Series (its dtype line), the notebook's branch on the profile it ran with.
DICT_REPR = re.compile(r"^\{\s*['\"]?[\w .-]+['\"]?\s*:|^\[\{'")
FRAME_REPR = re.compile(
    r"\[\d+ rows x \d+ columns\]|\d+ rows × \d+ columns|^\s*\.\.\.\s+\.\.\.|dtype: \w+$", re.M
)
PROFILE_BRANCH = re.compile(r"this run is the (paper|smoke) profile|is not part of this profile")


def machinery_problems(page: str, long_tables: list, printed: list[str]) -> list[str]:
    """Long tables, and printed text: a chapter says what it found in sentences (Markdown),
    never in `print()` lines (a log line, "final cos(beta, beta*) = 0.9821, ..."); a printed
    dict, DataFrame repr or the profile's branch is named as such."""
    problems = [
        f"{page}: a table of {rows} rows (#{section}): make it a download"
        for section, rows in long_tables
    ]
    for text in printed:
        named = [
            name
            for name, pattern in (
                ("a printed dict", DICT_REPR),
                ("a DataFrame repr", FRAME_REPR),
                ("the profile's branch", PROFILE_BRANCH),
            )
            if pattern.search(text)
        ]
        for name in named or ["a printed line (say it in a sentence)"]:
            problems.append(f"{page}: {name}: {text[:80]!r}")
    return problems


# ---- data tables a reader reads: headers in words, numbers to a few significant digits -------
# A pandas table shown on a page (`core.site.web_tables.readable_frame` shows a chapter's
# frames so): its header cells (column names, index names, row labels) and its data cells.
DATA_TABLES = (
    "result = [...document.querySelectorAll('article table.dataframe')]"
    ".filter(t => t.getClientRects().length).map(t => [t.closest('section') ?"
    " t.closest('section').id : '', [...t.querySelectorAll('th')].map(c => c.textContent.trim()),"
    " [...t.querySelectorAll('td')].map(c => c.textContent.trim())])"
)
SNAKE_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")  # `dist_l1`, `gap_bound`
FLOAT_TEXT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?$")
MAX_DIGITS = 4  # significant digits a table shows (pandas printed 6: `3.777265e-16`)


def significant_digits(text: str) -> int:
    """The significant digits of a decimal written with a point (`0.0001234`: 4)."""
    mantissa = re.split(r"[eE]", text.lstrip("+-"))[0].replace(".", "")
    return len(mantissa.lstrip("0")) or 1


def table_problems(page: str, tables: list) -> list[str]:
    """Data tables with a snake_case header (a program's name for a column, not a reader's) or
    a number printed to more than MAX_DIGITS significant digits; the first few named."""
    problems = []
    for section, headers, cells in tables:
        snake = [h for h in headers if SNAKE_HEADER.match(h)]
        if snake:
            problems.append(f"{page} (#{section}): snake_case headers {snake[:4]}")
        long = [c for c in cells if FLOAT_TEXT.match(c) and significant_digits(c) > MAX_DIGITS]
        if long:
            problems.append(f"{page} (#{section}): over {MAX_DIGITS} significant digits {long[:3]}")
    return problems


# ---- phone figures: the smallest text of every figure shown, in CSS px ----------------------
# A figure inch is 100 CSS px at the width it is drawn for (core.site.plotting.DISPLAY_DPI): its
# smallest font shows at min_font_pt / 72 inch, scaled by the width it is shown at.
PHONE_TEXT = (
    "result = [...document.querySelectorAll('figure.book-figure img')]"
    ".filter(i => i.getClientRects().length && i.getBoundingClientRect().width > 0)"
    ".map(i => { const r = JSON.parse(i.dataset.legibility || '{}');"
    " const w = i.getBoundingClientRect().width;"
    " return [i.getAttribute('src'), r.min_font_pt && r.width_in ?"
    " Math.round(100 * r.min_font_pt * w / (72 * r.width_in)) / 100 : null]; })"
)
MIN_PHONE_TEXT_PX = 9.0


def phone_text_problems(page: str, found: list) -> list[str]:
    return [
        f"{page}: {src}: smallest text {px} CSS px (< {MIN_PHONE_TEXT_PX})"
        if px is not None
        else f"{page}: {src}: no legibility record"
        for src, px in found
        if px is None or px < MIN_PHONE_TEXT_PX
    ]


# ---- the browser's console: errors a page logs while it loads ------------------------------
# `test_website.probe` puts CONSOLE_HOOK first in the page's head, so it sees every error.
CONSOLE_HOOK = (
    "<script>window.__console = []; window.addEventListener('error', e =>"
    " window.__console.push(String(e.message)));"
    "(() => { const error = console.error.bind(console); console.error = (...a) =>"
    " { window.__console.push(a.map(String).join(' ')); error(...a); }; })();</script>"
)
CONSOLE = "result = window.__console || ['the console hook did not run']"


def console_problems(page: str, messages: list[str]) -> list[str]:
    return [f"{page}: console: {m[:160]}" for m in messages]


# ---- no word cut mid-word: in the status page's row titles (its first column) and in every
# state badge (a chapter's claims table, the status page), a word that
# fits its cell's width is never set on two lines; a break at a space, a hyphen, a slash or a
# bar (where Unicode allows a line break) is not a cut. A word wider than its cell may break (it
# could not fit otherwise), and is not counted. ------------------------------------------------
MID_WORD = (
    "result = [];"
    "for (const td of document.querySelectorAll('.status-table td:first-child, .claim-status'))"
    " {"
    # a badge is measured against its table cell: its own padding must not make a word that
    # fits the cell break
    " const cell = td.matches('.claim-status') ? (td.closest('td') || td) : td;"
    " const s = getComputedStyle(cell);"
    " const room = cell.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);"
    " const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);"
    " for (let n = walk.nextNode(); n; n = walk.nextNode()) {"
    "  if (n.parentElement.closest('mjx-container')) continue;"
    "  for (const m of n.textContent.matchAll(/[^|\\s\\-\u2010-\u2014\\/]+/g)) {"
    "   const r = document.createRange(); r.setStart(n, m.index);"
    "   r.setEnd(n, m.index + m[0].length);"
    "   const boxes = [...r.getClientRects()].filter(b => b.width > 0);"
    "   const tops = new Set(boxes.map(b => Math.round(b.top)));"
    "   const wide = boxes.reduce((a, b) => a + b.width, 0);"
    "   if (tops.size > 1 && wide <= room) result.push(m[0]); } } }"
)


def mid_word_problems(page: str, broken: list[str]) -> list[str]:
    return (
        [f"{page}: {len(broken)} words cut mid-word in table cells, e.g. {broken[:3]}"]
        if broken
        else []
    )


# ---- display maths fits its column: MathJax 3 does not break a line, so a wide equation ran
# past the column (gln_norm's authors' program: 873 px in a 688 px column at 1280 px) ---------
DISPLAY_MATH = (
    "result = [...document.querySelectorAll('article mjx-container[display=\"true\"]')]"
    ".filter(m => m.getClientRects().length)"
    ".map(m => [m.textContent.slice(0, 40), m.scrollWidth, m.parentElement.clientWidth])"
)


def display_math_problems(page: str, width: int, equations: list) -> list[str]:
    """Display equations wider (by more than a pixel) than the column they sit in."""
    return [
        f"{page} at {width} px: an equation {need} px wide in a {column} px column: {text!r}"
        for text, need, column in equations
        if need > column + 1
    ]


# ---- the claims table's type: a claim's name, value and badge no smaller than its small print
# (the paper's words, the interval): on a phone the name was 11.6 px, the badge 9.8 px and the
# quote 14.4 px -----------------------------------------------------------------------------
CLAIMS_TYPE = (
    "const px = e => e ? parseFloat(getComputedStyle(e).fontSize) : null;"
    "const rows = [...document.querySelectorAll('table.claims-table tr[id^=\"claim-\"]')];"
    "const row = rows.find(r => r.querySelector('td:nth-child(2) small')) || rows[0];"
    "const value = row && row.querySelector('td:nth-child(2)');"
    "result = row ? {name: px(row.querySelector('td:first-child > b')), value: px(value),"
    " badge: px(row.querySelector('.claim-status')),"
    " quote: px(row.querySelector('td:first-child > small')), interval: px(value.querySelector("
    "'small'))} : null"
)


def claims_type_problems(page: str, found: dict | None) -> list[str]:
    """A claims table whose claim name, value or badge is set smaller than its small print."""
    if not found:
        return []
    small = max((px for px in (found["quote"], found["interval"]) if px is not None), default=0)
    return [
        f"{page}: the claim's {part} is {found[part]} px, its small print {small} px"
        for part in ("name", "value", "badge")
        if found[part] is None or found[part] < small - 0.01
    ]


# ---- page height: a chapter page at most MAX_PAGE_PX tall at 1280 px (gln_norm's was 65,062
# px, 72 screens; its per-cell record is a page of its own: core.site.record_page) -----------
MAX_PAGE_PX = 25_000


def height_problems(heights: dict[str, int]) -> list[str]:
    return [
        f"{page}: {px:,} px tall at 1280 px (at most {MAX_PAGE_PX:,})"
        for page, px in heights.items()
        if px > MAX_PAGE_PX
    ]


# ---- maths a reader should see typeset: ASCII notation in a sentence outside $...$ ----------
ASCII_MATHS = re.compile(
    r"\|\||\b[A-Za-z]+_[A-Za-z0-9{]+|\w\^[\w{(]|<=|>=|\bsqrt\(|"
    r"\b(?:beta|alpha|sigma|gamma|lambda|theta|epsilon|delta)(?:_|\b)"
)


def ascii_maths(text: str) -> list[str]:
    """ASCII maths outside `$...$` and outside typeset maths spans (`||beta||_1`, `w^T`, `<=`)."""
    bare = re.sub(r"\$[^$]+\$", " ", text)
    bare = re.sub(r"<span class=\"math[^\"]*\">.*?</span>", " ", bare, flags=re.S)
    return ASCII_MATHS.findall(bare)


# ---- a phone's screen: nothing runs past its edges, and what scrolls sideways says so --------
# An element out of the window's width that no box of it holds (a box that scrolls or clips,
# itself inside the window) runs off the screen; a box of the article that scrolls sideways
# shows a cue (book.css: "scroll sideways →" in its ::before); one that clips what it holds
# cuts it off (an inline formula: by more than a glyph's overhang, 4 px). Hidden elements
# (the theme's closed drawers, MathJax's copy of a formula for screen readers, clipped to
# nothing) are not seen.
OFF_SCREEN = (
    # the page marks its scrollers when a fold opens (its `toggle` event, which comes after
    # this measure, run at once after OPEN_FOLDS): as that handler does
    "if (window.bookMarkScrollers) window.bookMarkScrollers();"
    "const vw = document.documentElement.clientWidth; const off = [], mute = [], cut = [];"
    "const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +"
    " (typeof e.className === 'string' && e.className.trim() ? '.' +"
    " e.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');"
    "const inside = b => b.left >= -1 && b.right <= vw + 1;"
    "const held = e => { for (let a = e.parentElement; a && a !== document.documentElement;"
    " a = a.parentElement) { if (getComputedStyle(a).overflowX !== 'visible' &&"
    " inside(a.getBoundingClientRect())) return true; } return false; };"
    "for (const e of document.body.querySelectorAll('*')) {"
    " if (!e.getClientRects().length || !e.checkVisibility({visibilityProperty: true})"
    " || e.closest('mjx-assistive-mml')) continue;"
    " const r = e.getBoundingClientRect(); if (r.width < 1) continue;"
    " if (!inside(r) && !held(e) && !off.some(o => o.contains(e))) off.push(e);"
    " const s = getComputedStyle(e); if (!e.closest('article') || s.display === 'inline') continue;"
    " const slack = e.matches('span.math') ? 4 : 1;"
    " if (e.scrollWidth > e.clientWidth + slack && s.overflowX !== 'visible') {"
    "  if (['hidden', 'clip'].includes(s.overflowX)) cut.push(e);"
    "  else if (getComputedStyle(e, '::before').content === 'none' &&"
    "   getComputedStyle(e, '::after').content === 'none') mute.push(e); } }"
    "result = {width: vw, off: off.map(e => [name(e), Math.round(Math.max("
    "-e.getBoundingClientRect().left, e.getBoundingClientRect().right - vw))]),"
    " mute: mute.map(name), cut: cut.map(name)}"
)


def off_screen_problems(page: str, width: int, found: dict) -> list[str]:
    """Elements past the screen's edges, boxes that scroll sideways without a cue and boxes
    that cut off what they hold (the first few of each named)."""
    problems = []
    if found["off"]:
        problems.append(f"{page} at {width} px: {len(found['off'])} off screen: {found['off'][:4]}")
    if found["mute"]:
        problems.append(
            f"{page} at {width} px: {len(found['mute'])} scroll with no cue: {found['mute'][:4]}"
        )
    if found["cut"]:
        problems.append(f"{page} at {width} px: {len(found['cut'])} cut off: {found['cut'][:4]}")
    return problems


# ---- inline maths: a scroll cue only on a formula wider than its line, and no formula that
# fits is clipped. MathJax's hidden copy of a formula for screen readers is wider than the
# formula drawn, which made 212 of 448 formulas on tensor_networks (at 1280 px) show "↔" and
# a scroll bar; the theme clipped every inline formula to its box (overflow hidden). The line
# is the nearest box around the formula that is not inline, less its padding. -----------------
INLINE_FORMULAS = (
    "const line = e => { let a = e.parentElement;"
    " while (a.parentElement && getComputedStyle(a).display.startsWith('inline'))"
    " a = a.parentElement; const s = getComputedStyle(a);"
    " return a.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };"
    "result = {formulas: 0, needless: [], clipped: []};"
    "for (const e of document.querySelectorAll('article span.math')) {"
    " const f = e.querySelector('mjx-container');"
    " if (!f || !e.getClientRects().length) continue; result.formulas += 1;"
    " const w = f.getBoundingClientRect().width, room = line(e);"
    " const cue = getComputedStyle(e, '::before').content !== 'none';"
    " const s = getComputedStyle(e); const text = e.textContent.slice(0, 30);"
    " if (cue && w <= room + 1) result.needless.push([text, Math.round(w), Math.round(room)]);"
    " if (!cue && (s.overflowX !== 'visible' || s.overflowY !== 'visible'))"
    "  result.clipped.push(text); }"
)


def inline_math_problems(page: str, width: int, found: dict) -> list[str]:
    """Inline formulas that fit their line yet show a scroll cue, and formulas without a cue
    drawn in a box that clips them (the first few of each named)."""
    problems = []
    if found["needless"]:
        problems.append(
            f"{page} at {width} px: {len(found['needless'])} of {found['formulas']} inline"
            f" formulas fit their line (formula px, line px) but show a scroll cue:"
            f" {found['needless'][:3]}"
        )
    if found["clipped"]:
        problems.append(
            f"{page} at {width} px: {len(found['clipped'])} inline formulas clipped to their"
            f" box: {found['clipped'][:3]}"
        )
    return problems


# ---- the status page's overview: no word or number of a cell set on two lines (a phone had
# "16" as "1 / 6" and the headers a letter a line; 1280 px had "err-atu m"). A word is broken
# where its text lies on two lines; a compound breaks after its hyphen as text does. ----------
OVERVIEW_WORDS = (
    "result = [];"
    "for (const cell of document.querySelectorAll('.status-overview th, .status-overview td')) {"
    " const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);"
    " for (let n = walk.nextNode(); n; n = walk.nextNode()) { let at = 0;"
    "  for (const w of n.textContent.split(/(\\s+|(?<=-))/)) { if (w.trim()) {"
    "   const r = document.createRange(); r.setStart(n, at); r.setEnd(n, at + w.length);"
    "   const spots = new Set([...r.getClientRects()].filter(b => b.width && b.height)"
    "    .map(b => Math.round(b.top) + ',' + Math.round(b.left)));"
    "   if (spots.size > 1) result.push(w); } at += w.length; } } }"
)


def overview_word_problems(page: str, width: int, broken: list[str]) -> list[str]:
    return (
        [
            f"{page} at {width} px: {len(broken)} words or numbers of the overview on two lines,"
            f" e.g. {broken[:6]}"
        ]
        if broken
        else []
    )
