"""Le & Jegelka (2022), "Training invariances and the low-rank phenomenon: beyond linear
networks"."""

PAPER = "le2022training"  # the key in book/references.bib of the paper this chapter reproduces
