"""implicit_bias: the shared library behind the implicit-bias-book chapters."""

__version__ = "0.1.0"
