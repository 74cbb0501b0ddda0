"""Unit strings to SI floats, and SI floats to readable strings.

Everything inside the workbench is seconds, bytes and bytes per second. Strings
from configs and the command line carry their unit and are taken exactly as
written: ``GB`` is 10**9 bytes and ``GiB`` is 2**30 bytes; ``50GB/s`` is
5e10 B/s and ``25GiB/s`` is 25 * 2**30 B/s. A bare number is already SI.
"""

from __future__ import annotations

import math

import re

__all__ = [
    "UnitError",
    "parse_time",
    "parse_size",
    "parse_bandwidth",
    "format_time",
    "format_size",
    "format_bandwidth",
]


class UnitError(ValueError):
    """A unit string that cannot be parsed; the message names the string."""


_TIME_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "ps": 1e-12,
    "min": 60.0,
    "m": 60.0,
    "h": 3600.0,
}

_SIZE_UNITS = {
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
}

_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    match = _NUMBER_UNIT.match(text)
    if not match:
        raise UnitError(f"cannot parse {what} {text!r}: expected a number with a unit, e.g. {_EXAMPLES[what]}")
    return float(match.group(1)), match.group(2)


_EXAMPLES = {
    "time": "'0.5us', '700ns', '30s'",
    "size": "'1GiB', '64KB', '1048576'",
    "bandwidth": "'50GB/s', '25GiB/s'",
}


def _float(value: int | float, what: str) -> float:
    """A number as a float; an integer beyond a float's range is a ``UnitError``, not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        raise UnitError(f"{what} beyond a float's range (about 1.8e308) is not a finite number") from None


def _non_negative(value: float, text: object, what: str) -> float:
    if value < 0:
        raise UnitError(f"{what} {text!r} is negative")
    if not math.isfinite(value):
        raise UnitError(f"{what} {text!r} is not a finite number")
    return value


def parse_time(text: str | float | int) -> float:
    """Seconds from ``'0.5us'``, ``'700ns'``, ``'30s'``, ``'2min'`` or a bare number of seconds."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse time {text!r}")
    if isinstance(text, (int, float)):
        return _non_negative(_float(text, "time"), text, "time")
    number, unit = _split(str(text), "time")
    key = unit.lower() if unit != "µs" else unit
    if key == "":
        return _non_negative(number, text, "time")
    if key not in _TIME_UNITS:
        raise UnitError(f"cannot parse time {text!r}: unknown unit {unit!r} (use s, ms, us, ns, min, h)")
    return _non_negative(number * _TIME_UNITS[key], text, "time")


def parse_size(text: str | float | int) -> float:
    """Bytes from ``'1GiB'``, ``'64KB'``, ``'1MB'`` or a bare number of bytes."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse size {text!r}")
    if isinstance(text, (int, float)):
        return _non_negative(_float(text, "size"), text, "size")
    number, unit = _split(str(text), "size")
    key = unit.lower()
    if key == "":
        return _non_negative(number, text, "size")
    if key not in _SIZE_UNITS:
        raise UnitError(f"cannot parse size {text!r}: unknown unit {unit!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    return _non_negative(number * _SIZE_UNITS[key], text, "size")


def parse_bandwidth(text: str | float | int) -> float:
    """Bytes per second from ``'50GB/s'``, ``'25GiB/s'`` or a bare number of B/s."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse bandwidth {text!r}")
    if isinstance(text, (int, float)):
        return _non_negative(_float(text, "bandwidth"), text, "bandwidth")
    number, unit = _split(str(text), "bandwidth")
    if unit == "":
        return _non_negative(number, text, "bandwidth")
    lowered = unit.lower()
    if not lowered.endswith("/s"):
        raise UnitError(f"cannot parse bandwidth {text!r}: expected a rate such as '50GB/s' or '25GiB/s'")
    size_unit = lowered[:-2]
    if size_unit not in _SIZE_UNITS:
        raise UnitError(f"cannot parse bandwidth {text!r}: unknown unit {unit!r}")
    return _non_negative(number * _SIZE_UNITS[size_unit], text, "bandwidth")


def format_time(seconds: float) -> str:
    """A readable time: ``'12.3 us'``, ``'4.56 ms'``, ``'1.2 s'``."""
    if seconds is None:
        return "-"
    magnitude = abs(seconds)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1e-6:
        return f"{seconds * 1e9:.3g} ns"
    if magnitude < 1e-3:
        return f"{seconds * 1e6:.4g} us"
    if magnitude < 1:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds:.4g} s"


def format_size(num_bytes: float) -> str:
    """A readable size: whole decimal units (64MB, not 62500KiB), else whole binary ones, else decimal."""
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if num_bytes >= factor and float(num_bytes / factor).is_integer() and num_bytes / factor < 1000:
            return f"{num_bytes / factor:g}{unit}"
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= factor and float(num_bytes / factor).is_integer() and num_bytes / factor < 1024:
            return f"{num_bytes / factor:g}{unit}"
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if num_bytes >= factor:
            return f"{num_bytes / factor:.4g}{unit}"
    return f"{num_bytes:g}B"


def format_bandwidth(bytes_per_second: float) -> str:
    """GB/s (10**9 B/s) with four significant digits."""
    return f"{bytes_per_second / 1e9:.4g} GB/s"
