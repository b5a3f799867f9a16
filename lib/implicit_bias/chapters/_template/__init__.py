"""__title__: the chapter's task functions (`tasks`), frames and metrics (`analysis`) and
figures (`figures`).

This package is `implicit_bias.chapters._template` until `python -m implicit_bias new-chapter`
copies it: every `__chapter__` becomes the new chapter's id and `__title__` its title. As it
stands it is a complete small chapter (gradient descent on least squares from zero converges to
the minimum-norm interpolator), so a new chapter starts green and is edited into the paper's.
"""

PAPER = "__paper__"  # the key in book/references.bib of the paper this chapter reproduces
