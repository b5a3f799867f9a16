"""Soudry, Hoffer, Nacson, Gunasekar & Srebro 2018, "The Implicit Bias of Gradient Descent on
Separable Data": the chapter's task functions (`tasks`), frames and metrics (`analysis`) and
figures (`figures`); the numerics are in `implicit_bias.models.separable_max_margin`."""

PAPER = "soudry2018implicit"  # the key in book/references.bib of the paper this chapter reproduces
