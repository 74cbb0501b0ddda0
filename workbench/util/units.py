"""Unit strings to SI floats, and SI floats to readable strings.

Everything inside the workbench is seconds, bytes and bytes per second. Strings
from configs and the command line carry their unit and are taken exactly as
written: ``GB`` is 10**9 bytes and ``GiB`` is 2**30 bytes; ``50GB/s`` is
5e10 B/s and ``25GiB/s`` is 25 * 2**30 B/s. A bare number is already SI.

Bits and bytes. The case of the ``b`` tells them apart: ``B`` is a byte, ``b`` a bit, and
``bit`` is always a bit. A rate in bits is converted to bytes (divided by 8): ``400Gb/s``,
``400Gbps`` and ``400Gbit/s`` are all 50GB/s; ``GB/s``, ``GiB/s``, ``GBps`` and ``GB/sec`` are
bytes. The prefix may be ``k`` or ``K`` (kilo), ``M``, ``G``, ``T`` (decimal) or ``Ki``, ``Mi``,
``Gi``, ``Ti`` (binary); a bare prefix (``1M``, ``50G/s``) is bytes. A unit written all in
lower case with a lower-case ``b`` (``gb/s``, ``gbps``, ``kb``, ``b/s``) cannot be told apart
(people write ``gb`` for gigabytes and ``kbps`` for kilobits) and is refused as ambiguous, with
how to write it. Sizes are bytes: a size in bits (``1Gb``) is refused, naming the byte spelling.

Ranges. A value beyond these is refused as out of range (one line naming it), so no time the
workbench computes from them overflows to an infinity:

* time (alpha, overhead, time limits): 0, or 1e-15 s (1 fs) to 1e9 s (about 32 years);
* size: 0, or 1 B to 1e18 B (1 EB);
* bandwidth: 0, or 1 B/s to 1e18 B/s (1 EB/s).

0 passes here: what a zero means (a zero alpha is fine, a zero bandwidth or size is not) is the
caller's to say, with its own message. Negative and non-finite values are refused.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "UnitError",
    "TIME_RANGE",
    "SIZE_RANGE",
    "BANDWIDTH_RANGE",
    "parse_time",
    "parse_size",
    "parse_bandwidth",
    "format_time",
    "format_size",
    "format_bandwidth",
]


class UnitError(ValueError):
    """A unit string that cannot be parsed; the message names the string."""


# the accepted positive values, inclusive (0 is accepted too: module docstring)
TIME_RANGE = (1e-15, 1e9)
SIZE_RANGE = (1.0, 1e18)
BANDWIDTH_RANGE = (1.0, 1e18)
_RANGE_WORDS = {"time": "0, or 1e-15 s to 1e9 s", "size": "0, or 1 B to 1e18 B",
                "bandwidth": "0, or 1 B/s to 1e18 B/s"}
_RANGES = {"time": TIME_RANGE, "size": SIZE_RANGE, "bandwidth": BANDWIDTH_RANGE}

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

_PREFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
             "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}

# a size unit: a prefix (any case), then what is counted; nothing counted is bytes (``1M``)
_DATA_UNIT = re.compile(r"^(?P<prefix>(?:[kKmMgGtT][iI]?)?)(?P<what>B|b|bits?|[bB]ytes?|)$")
# a rate: a size unit over a second (``/s``, ``/sec``), or ``ps`` after its B or b (``Gbps``)
_RATE_UNIT = re.compile(r"^(?P<data>.*?)(?:/s|/sec|(?<=[bB])ps)$")

_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str) -> tuple[float, str, str]:
    match = _NUMBER_UNIT.match(text)
    if not match:
        raise UnitError(f"cannot parse {what} {text!r}: expected a number with a unit, e.g. {_EXAMPLES[what]}")
    return float(match.group(1)), match.group(2), match.group(1)


_EXAMPLES = {
    "time": "'0.5us', '700ns', '30s'",
    "size": "'1GiB', '64KB', '1048576'",
    "bandwidth": "'50GB/s', '25GiB/s', '400Gb/s'",
}


def _float(value: int | float, what: str) -> float:
    """A number as a float; an integer beyond a float's range is a ``UnitError``, not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        raise UnitError(f"{what} beyond a float's range (about 1.8e308) is not a finite number") from None


def _checked(value: float, text: object, what: str, number: float | None = None) -> float:
    """``value`` when it is 0 or within the range of ``what`` (module docstring); else a ``UnitError``
    naming ``text``. ``number``: the number as written, when a unit multiplied it (a product that
    overflows is out of range, a number that is infinite as written is not finite)."""
    if value < 0:
        raise UnitError(f"{what} {text!r} is negative")
    if math.isnan(value) or (math.isinf(value) and (number is None or not math.isfinite(number))):
        raise UnitError(f"{what} {text!r} is not a finite number")
    low, high = _RANGES[what]
    if value != 0 and not low <= value <= high:
        raise UnitError(f"{what} {text!r} out of range ({_RANGE_WORDS[what]})")
    return value


def _prefix_spelling(prefix: str) -> str:
    """The prefix as it is written unambiguously: ``g`` -> ``G``, ``gi`` -> ``Gi``, ``k`` -> ``K``."""
    return prefix[:1].upper() + prefix[1:].lower()


def _data_unit(unit: str, text: str, what: str, number_text: str, rate: str = "") -> tuple[float, bool]:
    """(bytes per unit, whether the unit counts bits) for a size unit (``GB``, ``Gb``, ``Gbit``,
    ``GiB``, ``M``); ``rate``: the ``/s`` written after it, for the messages. A lower-case ``b``
    after no prefix or a lower-case one is ambiguous, refused with how to write it."""
    match = _DATA_UNIT.match(unit)
    if not match:
        raise UnitError(f"cannot parse {what} {text!r}: unknown unit {unit + rate!r} "
                        f"(use e.g. {_EXAMPLES[what]})")
    prefix, counted = match.group("prefix"), match.group("what")
    factor = _PREFIXES[prefix.lower()]
    if counted in ("bit", "bits"):
        return factor, True
    if counted == "b":
        if prefix != prefix.lower():
            return factor, True
        canonical = _prefix_spelling(prefix)
        bits = f"'{number_text}{canonical}bit{rate}'" + (f" (or '{number_text}{canonical}b{rate}')" if prefix else "")
        raise UnitError(f"{what} {text!r} is ambiguous (bits or bytes?): write '{number_text}{canonical}B{rate}' "
                        f"for bytes" + (f" or {bits} for bits" if rate else ""))
    return factor, False


def parse_time(text: str | float | int) -> float:
    """Seconds from ``'0.5us'``, ``'700ns'``, ``'30s'``, ``'2min'`` or a bare number of seconds
    (0, or 1e-15 s to 1e9 s)."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse time {text!r}")
    if isinstance(text, (int, float)):
        return _checked(_float(text, "time"), text, "time")
    number, unit, _ = _split(str(text), "time")
    key = unit.lower() if unit != "µs" else unit
    if key == "":
        return _checked(number, text, "time")
    if key not in _TIME_UNITS:
        raise UnitError(f"cannot parse time {text!r}: unknown unit {unit!r} (use s, ms, us, ns, min, h)")
    return _checked(number * _TIME_UNITS[key], text, "time", number)


def parse_size(text: str | float | int) -> float:
    """Bytes from ``'1GiB'``, ``'64KB'``, ``'1MB'`` or a bare number of bytes (0, or 1 B to 1e18
    B); a size in bits (``'1Gb'``) or an ambiguous one (``'1gb'``) is refused."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse size {text!r}")
    if isinstance(text, (int, float)):
        return _checked(_float(text, "size"), text, "size")
    number, unit, number_text = _split(str(text), "size")
    if unit == "":
        return _checked(number, text, "size")
    factor, bits = _data_unit(unit, str(text), "size", number_text)
    if bits:
        worth = f" ({number_text}{unit} is {format_size(number * factor / 8)})" \
            if math.isfinite(number * factor) else ""
        raise UnitError(f"size {text!r} is in bits (b); a size is in bytes (B): write it in bytes{worth}")
    return _checked(number * factor, text, "size", number)


def parse_bandwidth(text: str | float | int) -> float:
    """Bytes per second from ``'50GB/s'``, ``'25GiB/s'``, ``'400Gb/s'`` (bits: 50GB/s) or a bare
    number of B/s (0, or 1 B/s to 1e18 B/s); an ambiguous rate (``'5gb/s'``) is refused."""
    if isinstance(text, bool):
        raise UnitError(f"cannot parse bandwidth {text!r}")
    if isinstance(text, (int, float)):
        return _checked(_float(text, "bandwidth"), text, "bandwidth")
    number, unit, number_text = _split(str(text), "bandwidth")
    if unit == "":
        return _checked(number, text, "bandwidth")
    rate = _RATE_UNIT.match(unit)
    if not rate or not rate.group("data"):
        raise UnitError(f"cannot parse bandwidth {text!r}: expected a rate such as '50GB/s', '25GiB/s' "
                        f"or '400Gb/s'")
    data = rate.group("data")
    factor, bits = _data_unit(data, str(text), "bandwidth", number_text, "/s")
    return _checked(number * factor / (8 if bits else 1), text, "bandwidth", number)


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
