"""Azulay et al. 2021, "On the implicit bias of initialization shape: beyond infinitesimal
mirror descent": warped IMD gives the implicit regularizer of two-layer fully connected networks."""

PAPER = "azulay2021implicit"  # the key in book/references.bib of the paper this chapter reproduces
