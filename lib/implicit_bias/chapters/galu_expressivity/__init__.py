"""Fiat, Malach & Shalev-Shwartz, "Decoupling gating from linearity" (2019): GaLU networks."""

PAPER = "fiat2018decoupling"  # the key in book/references.bib of the paper this chapter reproduces
