"""The website's layout of wide data tables (implicit_bias.core.site.web_tables): a table too wide
for the text column is transposed or cut into column groups, every value kept as printed."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from implicit_bias.core.site import web_tables
from implicit_bias.core.site.web_tables import COLUMN_PX, fit_tables, group_captions, parse


def values(page: str) -> Counter:
    return Counter(re.findall(r"<td[^>]*>(.*?)</td>", page, re.S))


def tables(page: str) -> list[str]:
    return re.findall(r"<table.*?</table>", page, re.S)


def wide(rows: int, columns: int, keys: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        rng.normal(size=(rows, columns)) * 1e-7,
        columns=[f"relative_error_{j}" for j in range(columns)],
    )
    if keys:
        frame.insert(0, "seed", range(rows))
        frame.insert(0, "method", [f"SVM-GLN-{i % 3}" for i in range(rows)])
    return frame


def test_a_table_that_fits_is_left_as_it_is():
    page = pd.DataFrame({"a": [1.5, 2.5], "b": [3, 4]}).to_html()
    out, changed = fit_tables(page)
    assert changed == 0 and out == page


def test_a_wide_table_of_few_rows_is_transposed_with_every_value():
    frame = wide(2, 20)
    page = frame.to_html()
    out, changed = fit_tables(page)
    assert changed == 1 and "book-transposed" in out
    assert values(out) == values(page)  # every value as pandas printed it, none dropped
    assert out.count("<th>relative_error_7</th>") == 1  # a column is now a row
    grid = parse(*re.match(r"(<table[^>]*>)(.*)</table>", out, re.S).groups())
    assert grid.n_data == 2 and len(grid.body) == 20


def test_a_wide_long_table_is_cut_into_groups_that_repeat_the_row_labels():
    frame = wide(12, 16, keys=True)
    page = frame.to_html()
    out, changed = fit_tables(page)
    groups = tables(out)
    assert changed == 1 and len(groups) >= 2
    for group in groups:
        grid = parse(*re.match(r"(<table[^>]*>)(.*)</table>", group, re.S).groups())
        assert grid.estimated_px() <= COLUMN_PX
        assert [c.text for c in grid.head[0][:2]] == ["method", "seed"]  # the keys, again
        assert len(grid.body) == 12
    # every measured value once, the keys once per group
    repeated = Counter(
        {k: v * (len(groups) - 1) for k, v in values(frame[["method", "seed"]].to_html()).items()}
    )
    assert values(out) == values(page) + repeated
    assert re.search(r"<caption>columns 1–\d+ of 18</caption>", groups[0])
    assert "(and 1–2 again)</caption>" in groups[1]


def test_groups_keep_spanning_headers_and_row_labels():
    columns = pd.MultiIndex.from_product(
        [["gd", "flow", "svm"], [f"error_at_step_{i}" for i in range(5)]]
    )
    index = pd.MultiIndex.from_product([["relu", "linear"], [10, 20]], names=["model", "H"])
    frame = pd.DataFrame(np.arange(60).reshape(4, 15) / 7, index=index, columns=columns)
    page = frame.to_html()
    out, _ = fit_tables(page)
    groups = tables(out)
    assert len(groups) >= 2 and values(out) == values(page)
    assert all(g.count('rowspan="2"') == page.count('rowspan="2"') for g in groups)
    shown = []
    for group in groups:  # each column under its own top-level name, spans merged again
        grid = parse(*re.match(r"(<table[^>]*>)(.*)</table>", group, re.S).groups())
        shown += [(top.text, name.text) for top, name in zip(*grid.head[:2], strict=True)]
        assert group.count("colspan=") <= 3
    assert sorted(shown) == sorted(columns)


def test_a_table_of_words_may_wrap_anywhere_on_a_phone():
    words = pd.DataFrame(
        {"architecture": ["fully connected", "convolutional"], "shape": ["d", "k x d"], "n": [1, 2]}
    )
    assert "book-text-table" in fit_tables(words.to_html())[0]
    assert "book-text-table" not in fit_tables(wide(3, 3).to_html())[0]
    assert "book-text-table" in fit_tables(wide(0, 3).to_html())[0]  # only a header


def test_group_captions():
    assert group_captions([[0, 1, 2], [0, 3]], 1) == [
        "columns 1–3 of 4",
        "column 4 of 4 (and 1 again)",
    ]
    assert group_captions([[0, 1], [2, 3]], 0) == ["columns 1–2 of 4", "columns 3–4 of 4"]


def test_an_unusual_table_is_left_alone():
    odd = '<table border="1" class="dataframe"><tbody><tr><td>1</td></tr></tbody></table>'
    assert fit_tables(odd) == (odd, 0)
    assert web_tables.parse('<table class="dataframe">', "<thead></thead><tbody></tbody>") is None


def test_a_long_table_is_a_download_with_a_glimpse():
    """More than 20 rows: the sentence that says what it holds (else its size, never its column
    ids), a CSV of every row and column, and its first 5 rows and 6 columns folded; 20 rows or
    fewer: pandas' own table, without its row numbers, under its caption where it has one."""
    import base64
    import re

    import pandas as pd

    from implicit_bias.core.site.web_tables import long_table_html

    short = pd.DataFrame({"a": range(20)})
    assert long_table_html(short) == short.to_html(notebook=True, index=False)
    short.attrs["caption"] = "The runs of Figure 1 <by seed>"
    assert long_table_html(short) == (
        "<p class='table-caption'>The runs of Figure 1 &lt;by seed&gt;</p>"
        + short.to_html(notebook=True, index=False)
    )
    frame = pd.DataFrame({f"c{j}": [i * j for i in range(615)] for j in range(14)})
    shown = long_table_html(frame)
    assert "<p class='long-table'>A table of 615 rows: <a" in shown and "(c0" not in shown
    assert ">download all 615 rows as CSV</a>" in shown
    frame.attrs["about"] = "The runs of Figure 2, one per seed"
    assert "<p class='long-table'>The runs of Figure 2, one per seed: <a" in long_table_html(frame)
    frame.attrs = {"caption": "Every run"}  # a long table's caption says what the CSV holds
    assert "<p class='long-table'>Every run: <a" in long_table_html(frame)
    frame.attrs.clear()
    seeds = pd.DataFrame({"seed": [0, 1, 2], "error": [0.1, 0.2, 0.3]})
    seeds.attrs["about"] = "The error of each seed"
    per_seed = long_table_html(seeds)  # a short table the notebook calls a download
    assert per_seed.startswith("<p class='long-table'>The error of each seed: <a")
    assert "download all 3 rows as CSV" in per_seed
    csv = re.search(r"href='data:text/csv;base64,([^']+)'", shown).group(1)
    assert pd.read_csv(__import__("io").BytesIO(base64.b64decode(csv)), index_col=0).equals(frame)
    glimpse = shown.split("<details", 1)[1]
    assert glimpse.count("<tr") == 1 + 5 and "c6" not in glimpse and 'class="dataframe"' in glimpse


def test_a_table_shows_words_and_four_significant_digits():
    """A chapter's table reads as words and numbers: a snake_case header, index name or row
    label in words, a float to four significant digits in powers of ten, two below 1e-6
    (pandas showed `3.777265e-16`); labels
    that are not snake_case, integers and words as they are; the frame itself unchanged."""
    import pandas as pd

    from implicit_bias.core.site.web_tables import long_table_html, readable_frame

    frame = pd.DataFrame(
        {"dist_l1": [3.777265e-16, 0.98213456], "seed": [1, 2], "Method": ["GD", "gd_gln"]},
        index=pd.Index(["final_cos", "x"], name="sigma_y"),
    )
    shown = readable_frame(frame)
    assert list(shown.columns) == ["dist ℓ1", "seed", "Method"]
    assert shown.index.name == "σ y" and list(shown.index) == ["final cos", "x"]
    assert list(shown["dist ℓ1"]) == ["3.8 × 10⁻¹⁶", "0.9821"] and list(shown["seed"]) == [1, 2]
    assert list(shown["Method"]) == ["GD", "gd_gln"]  # values are data, not labels
    assert list(frame.columns) == ["dist_l1", "seed", "Method"]  # the frame is unchanged
    page = long_table_html(frame)
    assert "3.8 × 10⁻¹⁶" in page and "e-16" not in page and "dist_l1" not in page
    assert readable_frame(pd.DataFrame({"gd_error_step_0.4": [1]})).columns[0] == (
        "gd error step 0.4"
    )
    wide = pd.DataFrame({("a_b", "c_d"): [1.0]})
    assert list(readable_frame(wide).columns) == [("a b", "c d")]


def test_a_sentence_of_the_run_typesets_its_maths():
    """`Chapter.say` shows a finding as a paragraph (never a `print()` line): its `$...$` as
    Sphinx's inline maths, which MathJax typesets in an output cell, the rest escaped."""
    from implicit_bias.core.chapter import prose_html

    shown = prose_html(r"The gap's $R^2$ against $\|w\|_2^2$ is 0.979 < 1; costs \$5.")
    assert shown == (
        'The gap&#x27;s <span class="math notranslate nohighlight">\\(R^2\\)</span> against '
        '<span class="math notranslate nohighlight">\\(\\|w\\|_2^2\\)</span> is 0.979 &lt; 1; '
        "costs $5."
    )
    assert prose_html("no maths") == "no maths"


def test_labels_show_their_ascii_maths_as_signs():
    """A column's ASCII maths as a reader reads it (can fail: the names as they were)."""
    from implicit_bias.core.site.web_tables import readable_label

    assert readable_label("eta=0.05") == "η=0.05"
    assert readable_label("cos zeta") == "cos ζ"
    assert readable_label("log10 loss") == "log₁₀ loss"
    assert readable_label("dist_l1") == "dist ℓ1"
    assert readable_label("delta <= 1") == "δ ≤ 1"
    assert readable_label("metadata") == "metadata"  # letters inside a word stay
    assert readable_label("etas") == "etas"


def test_a_table_shows_booleans_as_words_and_no_row_numbers():
    """pandas showed `True` and its positional index 0, 1, ... beside the rows: a reader sees
    `yes` / `no` and no row numbers; a labelled index stays, a boolean label in words too."""
    import pandas as pd

    from implicit_bias.core.site.web_tables import long_table_html, readable_value

    assert [readable_value(v) for v in (1.23456e6, 1e-5, -2.5e-20, 1e-300, float("nan"))] == [
        "1.235 × 10⁶",
        "10⁻⁵",
        "-2.5 × 10⁻²⁰",
        "10⁻³⁰⁰",
        "n/a",
    ]
    frame = pd.DataFrame({"changed_by_sign_flip": [True, False], "runs": [3, 4]})
    page = long_table_html(frame)
    assert ">yes</td>" in page and ">no</td>" in page and "True" not in page
    assert "<th>0</th>" not in page and "<th>1</th>" not in page
    labelled = long_table_html(frame.set_index(pd.Index([False, True], name="median_init")))
    assert "<th>median init</th>" in labelled and "<th>no</th>" in labelled


def test_a_long_table_folds_under_its_caption_never_its_column_ids():
    """The website folds a table of more than 3 rows under the sentence the notebook gave it
    (moved into the fold's summary, not said twice), else under its size: never a list of its
    column ids, the old "A table of 5 rows (seed, init, gd_error, …)". A table cut into column
    groups folds once; a table inside a fold is not folded again."""
    import pandas as pd

    from implicit_bias.core.site.web_tables import long_table_html
    from implicit_bias.core.site.website import fold_tables

    frame = pd.DataFrame({"seed": range(5), "gd_error": [0.5] * 5})
    bare = fold_tables(f"<body>{long_table_html(frame)}</body>")
    assert "<details class='table-fold'><summary>A table of 5 rows</summary>" in bare
    assert "seed," not in bare.partition("</summary>")[0]
    frame.attrs["caption"] = "Theorem 1's runs, one per seed"
    said = fold_tables(f"<body>{long_table_html(frame)}</body>")
    assert "<summary>Theorem 1's runs, one per seed</summary>" in said
    assert "table-caption" not in said  # moved into the summary
    other = frame.copy()
    other.attrs["caption"] = "Theorem 2's runs"
    two = fold_tables(f"<body>{long_table_html(frame)}{long_table_html(other)}</body>")
    summaries = [s.partition("</summary>")[0] for s in two.split("<summary>")[1:]]
    assert summaries == ["Theorem 1's runs, one per seed", "Theorem 2's runs"]  # each its own
    short = fold_tables(f"<body>{long_table_html(frame.iloc[:3])}</body>")
    assert "<p class='table-caption'>Theorem 1's runs" in short and "<details" not in short
    group = (
        '<table class="dataframe book-column-group"><tbody>' + "<tr></tr>" * 5 + "</tbody></table>"
    )
    grouped = fold_tables(f"<body><p class='table-caption'>Cut</p>{group}\n{group}</body>")
    assert (
        grouped.count("<details class='table-fold'>") == 1 and "<summary>Cut</summary>" in grouped
    )
    inside = fold_tables(f"<body><details><summary>x</summary>{group}</details></body>")
    assert inside.count("<details") == 1


def test_a_page_table_drops_bookkeeping_and_spreads_list_cells():
    """A task's result frame as a page shows it: no `device` column, no cell printing a Python
    list (a warped_imd download showed '[0.1, 0.2, ...]' cells 60 px past a phone's column)."""
    import pandas as pd

    from implicit_bias.core.chapter import shown

    frame = pd.DataFrame({"a": [1, 2], "gd err": [[0.1, 0.2], [0.3, 0.4]], "device": ["cpu"] * 2})
    out = shown(frame)
    assert list(out.columns) == ["a", "gd err 1", "gd err 2"]
    assert out.loc[1, "gd err 2"] == 0.4
    flags = pd.DataFrame({"converged": [{"gd": True, "gf": False}]})
    assert list(shown(flags).columns) == ["converged gd", "converged gf"]
    plain = pd.DataFrame({"a": [1.0]})
    assert shown(plain).equals(plain)  # can fail: nothing to change, nothing changed
