"""Kubernetes resource quantities in exact arithmetic, counted the way the scheduler counts them.

The scheduler compares cpu in millicores (`MilliValue`) and every other resource as an integer
(`Value`, rounded up). We parse the full quantity grammar into a `Fraction` and scale once, so
`0.1`, `100m` and `1e-1` are the same amount and nothing is lost to floats.
"""
import re
from fractions import Fraction

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": 1,
            "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$")

MILLI_RESOURCES = frozenset({"cpu"})


def parse_quantity(value) -> Fraction:
    """Parse a Kubernetes quantity (`"1.5Gi"`, `"250m"`, `"1e3"`, `2`) into an exact Fraction.

    Raises ValueError with the offending text when it does not follow the grammar.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"invalid quantity {value!r}: not a string or number")
    m = _QUANTITY.match(value.strip())
    if not m or value.strip() != value:
        raise ValueError(f"invalid quantity {value!r}")
    number = Fraction(m.group("num") if not m.group("num").endswith(".") else m.group("num")[:-1] or "0")
    if m.group("bin"):
        number *= _BINARY[m.group("bin")]
    elif m.group("exp") is not None:
        number *= Fraction(10) ** int(m.group("exp"))
    else:
        number *= _DECIMAL[m.group("dec") or ""]
    return -number if m.group("sign") == "-" else number


def _ceil(f: Fraction) -> int:
    return -((-f.numerator) // f.denominator)


def scaled(resource: str, value) -> int:
    """The integer the scheduler compares for `resource`: millicores for cpu, units (rounded up) otherwise."""
    q = parse_quantity(value)
    return _ceil(q * 1000) if resource in MILLI_RESOURCES else _ceil(q)


def format_amount(resource: str, amount: int) -> str:
    """Render a scaled amount back as a readable quantity (for messages and tables)."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, factor in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
        if amount >= factor and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
