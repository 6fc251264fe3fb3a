"""Each unit maps to (dimension, factor to the base unit). Temperatures need offsets too."""

UNITS = {
    # length, base metre
    "mm": ("length", 0.001), "cm": ("length", 0.01), "m": ("length", 1.0), "km": ("length", 1000.0),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "mi": ("length", 1609.344),
    # mass, base gram
    "mg": ("mass", 0.001), "g": ("mass", 1.0), "kg": ("mass", 1000.0), "lb": ("mass", 453.59237),
    "oz": ("mass", 28.349523125),
    # time, base second
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0), "day": ("time", 86400.0),
    # data, base byte
    "B": ("data", 1.0), "KB": ("data", 1000.0), "MB": ("data", 1e6), "KiB": ("data", 1024.0),
    "MiB": ("data", 1024.0 ** 2),
}
TEMPERATURES = ("C", "F", "K")
ALIASES = {"meter": "m", "meters": "m", "metre": "m", "kilometers": "km", "hours": "h",
           "hour": "h", "seconds": "s", "pounds": "lb", "celsius": "C", "fahrenheit": "F"}
BYTE_STEPS = ["B", "KiB", "MiB", "GiB", "TiB"]


class UnitError(ValueError):
    pass


def _canonical(unit):
    unit = unit.strip()
    unit = ALIASES.get(unit.lower(), unit)
    if unit not in UNITS and unit not in TEMPERATURES:
        raise UnitError(f"unknown unit {unit!r}")
    return unit


def _to_kelvin(value, unit):
    if unit == "C":
        return value + 273.15
    if unit == "F":
        return (value - 32) * 5 / 9 + 273.15
    return value


def _from_kelvin(value, unit):
    if unit == "C":
        return value - 273.15
    if unit == "F":
        return (value - 273.15) * 9 / 5 + 32
    return value


def convert(value, from_unit, to_unit):
    src = _canonical(from_unit)
    dst = _canonical(to_unit)
    if src in TEMPERATURES or dst in TEMPERATURES:
        if not (src in TEMPERATURES and dst in TEMPERATURES):
            raise UnitError(f"cannot convert {src} to {dst}")
        kelvin = _to_kelvin(value, src)
        if kelvin < 0:
            raise UnitError("below absolute zero")
        return _from_kelvin(kelvin, dst)
    src_dim, src_factor = UNITS[src]
    dst_dim, dst_factor = UNITS[dst]
    if src_dim != dst_dim:
        raise UnitError(f"cannot convert {src_dim} to {dst_dim}")
    return value * src_factor / dst_factor


def parse_quantity(text):
    """'3.5 km' or '3.5km' -> (3.5, 'km')."""
    text = text.strip()
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] in ".-+eE"):
        if text[i] in "eE" and (i == 0 or not text[i - 1].isdigit()):
            break
        i += 1
    number, unit = text[:i], text[i:].strip()
    if not number or not unit:
        raise UnitError(f"expected a number and a unit: {text!r}")
    try:
        value = float(number)
    except ValueError:
        raise UnitError(f"bad number {number!r}") from None
    return value, _canonical(unit)


def human_bytes(n, precision=1):
    """Binary prefixes: 1536 -> '1.5 KiB'; below 1024 bytes no decimals."""
    if n < 0:
        raise UnitError("negative size")
    value = float(n)
    for step in BYTE_STEPS:
        if value < 1024 or step == BYTE_STEPS[-1]:
            if step == "B":
                return f"{int(value)} B"
            return f"{value:.{precision}f} {step}"
        value /= 1024
    raise AssertionError("unreachable")
