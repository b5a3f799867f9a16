"""implicit_bias: the shared library behind the implicit-bias-book chapters."""

import time as _time


def _version() -> str:
    """The installed package's version (pyproject.toml is its one source); from pyproject.toml
    itself in a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("implicit-bias-book")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()

# When this process imported the package: a source file changed after this moment may no longer
# be the code that runs, so code fingerprints refuse it (see
# `implicit_bias.core.engine.fingerprint`).
IMPORTED_AT = _time.time()

# Before numpy and torch load: compute with the same CPU kernels on every AVX2 machine.
from .core.engine.kernels import pin_kernels as _pin_kernels  # noqa: E402

_pin_kernels()
