"""Numbers as a reader writes them, for figures and sentences alike (light: no plotting
library, so the verdict text can use it without importing matplotlib)."""

from __future__ import annotations

import math
import re

_SUPERSCRIPT_DIGITS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(x: float, plain: tuple[float, float] = (1e-2, 1e4)) -> str:
    """A number as a reader writes it: `10⁻¹²`, `2 × 10⁶`; plainly (`0.25`, `1000`) where
    `plain[0] <= |x| < plain[1]`, never in a program's notation (`1e-12`, `2e+06`)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if plain[0] <= abs(x) < plain[1]:
        return f"{x:g}".replace("-", "−")
    exponent = math.floor(math.log10(abs(x)))
    mantissa = round(x / 10.0**exponent, 2)
    if abs(mantissa) >= 10:  # rounding carried into the next decade
        mantissa, exponent = mantissa / 10, exponent + 1
    power = "10" + str(exponent).translate(_SUPERSCRIPT_DIGITS)
    if mantissa == 1:
        return power
    if mantissa == -1:
        return "−" + power
    return f"{mantissa:g} × {power}".replace("-", "−")


E_NOTATION = re.compile(r"\b(\d+(?:\.\d+)?e[+-]?\d+)\b")


def powers_of_ten(text: str) -> str:
    """`text` with each number in a program's e-notation as `power_of_ten` writes it:
    '2.22e-16' as '2.22 × 10⁻¹⁶', '1e-10' as '10⁻¹⁰'."""
    return E_NOTATION.sub(lambda m: power_of_ten(float(m.group(1)), plain=(0.0, 0.0)), text)
