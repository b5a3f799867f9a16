"""Lippl, Abbott & Chung 2022, "The implicit bias of gradient descent on generalized gated linear
networks": gradient descent on gated linear networks minimizes the GLN norm, not the L2 norm."""

PAPER = "lippl2022implicit"  # the key in book/references.bib of the paper this chapter reproduces
