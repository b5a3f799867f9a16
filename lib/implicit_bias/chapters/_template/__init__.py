"""__title__

The chapter's task functions (`tasks`), frames and metrics (`analysis`) and figures
(`figures`). Copied from `implicit_bias.chapters._template` by `python -m implicit_bias
new-chapter`, it starts as a complete small chapter (gradient descent on least squares from zero
converges to the minimum-norm interpolator), so a new chapter starts green and is edited into
the paper's: replace this paragraph with what the chapter reproduces.
"""

PAPER = "__paper__"  # the key in book/references.bib of the paper this chapter reproduces
