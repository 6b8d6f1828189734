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


_NANO = Fraction(1, 10 ** 9)
_MAX_BINARY = 2 ** 63 - 1      # apimachinery caps binary-suffixed amounts at MaxInt64
_MAX_EXPONENT = 2 ** 31 - 1    # an exponent must fit an int32, as upstream's suffix parser demands
_SANE_EXPONENT = 1000          # beyond this, 10**exp is not worth computing: the result is not a real amount


def _round_up_nano(f: Fraction) -> Fraction:
    """apimachinery rounds a non-zero amount away from zero to a whole number of nano units."""
    n = f * 10 ** 9
    if n.denominator == 1:
        return f
    whole = -((-abs(n.numerator)) // n.denominator)
    return Fraction(whole if f > 0 else -whole, 10 ** 9)


def parse_quantity(value) -> Fraction:
    """Parse a Kubernetes quantity (`"1.5Gi"`, `"250m"`, `"1e3"`, `2`) into an exact Fraction.

    Follows apimachinery's ParseQuantity: amounts are rounded up to nano precision, binary-suffixed
    amounts are capped at MaxInt64. Raises ValueError with the offending text when it does not
    follow the grammar.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"invalid quantity {value!r}")
        return _round_up_nano(Fraction(repr(value)))
    if not isinstance(value, str):
        raise ValueError(f"invalid quantity {value!r}: not a string or number")
    m = _QUANTITY.match(value)
    if not m or value.strip() != value:
        raise ValueError(f"invalid quantity {value!r}")
    num = m.group("num")
    number = Fraction(num[:-1] or "0") if num.endswith(".") else Fraction(num)
    if m.group("bin"):
        number *= _BINARY[m.group("bin")]
        number = min(number, Fraction(_MAX_BINARY))
    elif m.group("exp") is not None:
        exp = int(m.group("exp"))
        if abs(exp) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {value!r}: exponent out of range")
        if number and exp > _SANE_EXPONENT:
            raise ValueError(f"invalid quantity {value!r}: exponent out of range")
        if exp < -_SANE_EXPONENT:
            number = _NANO if number else Fraction(0)   # far below one nano unit: rounds up to 1n
        else:
            number *= Fraction(10) ** exp
    else:
        number *= _DECIMAL[m.group("dec") or ""]
    number = _round_up_nano(number)
    return -number if m.group("sign") == "-" else number


def _ceil(f: Fraction) -> int:
    return -((-f.numerator) // f.denominator)


_PARSED = {}


def parse_quantity_cached(value) -> Fraction:
    """parse_quantity, remembered per string: a snapshot repeats the same few quantities."""
    if isinstance(value, str):
        q = _PARSED.get(value)
        if q is None:
            q = parse_quantity(value)
            if len(_PARSED) < 100_000:
                _PARSED[value] = q
        return q
    return parse_quantity(value)


def scaled(resource: str, value) -> int:
    """The integer the scheduler compares for `resource`: millicores for cpu, units (rounded up) otherwise."""
    q = parse_quantity_cached(value)
    return _ceil(q * 1000) if resource in MILLI_RESOURCES else _ceil(q)


# resource -> {quantity text: scaled(resource, text)}, only for texts whose exact amount is >= 0: the
# loader looks amounts up here before parsing anything; `scaled_fresh` fills it.
SCALED_TEXTS = {}


def scaled_fresh(resource: str, value):
    """`scaled(resource, value)` for a quantity string whose exact amount is >= 0, remembered in
    SCALED_TEXTS; None for anything else (not a string, not a quantity, negative), which
    the loader's checked readers then refuse or accept with their own message."""
    if type(value) is not str:
        return None
    try:
        q = parse_quantity_cached(value)
    except ValueError:
        return None
    if q < 0:
        return None
    amount = _ceil(q * 1000) if resource in MILLI_RESOURCES else _ceil(q)
    table = SCALED_TEXTS.get(resource)
    if table is None:
        table = SCALED_TEXTS[resource] = {}
    if len(table) < 10_000:
        table[value] = amount
    return amount


def scaled_limit(resource: str, value) -> int:
    """`scaled` for a limit the plan must stay under (a budget): rounded down, so a budget of
    0.0000001 cards allows none rather than one; negative amounts are refused."""
    q = parse_quantity_cached(value)
    if q < 0:
        raise ValueError(f"{value!r} is negative: a budget cannot be")
    q = q * 1000 if resource in MILLI_RESOURCES else q
    return q.numerator // q.denominator


def format_amount(resource: str, amount: int) -> str:
    """Render a scaled amount back as a readable quantity (for messages and tables)."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, factor in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
        if amount >= factor and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
