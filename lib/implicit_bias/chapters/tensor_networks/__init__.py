"""Yun, Krishnan & Mobahi, "A unifying view on implicit bias in training linear neural networks"."""

PAPER = "yun2021unifying"  # the key in book/references.bib of the paper this chapter reproduces
