"""Azulay et al. 2021, "On the implicit bias of initialization shape": the scale and shape of
the initialization of untied diagonal linear networks decide their implicit regularizer."""

PAPER = "azulay2021implicit"  # the key in book/references.bib of the paper this chapter reproduces
