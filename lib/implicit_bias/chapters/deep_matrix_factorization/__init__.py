"""Implicit regularization in deep matrix factorization (Arora, Cohen, Hu & Luo, 2019): the
chapter's task functions (`tasks`), frames and metrics (`analysis`) and figures (`figures`)."""

PAPER = "arora2019implicit"  # the key in book/references.bib of the paper this chapter reproduces
