"""JSON for large files: orjson when it is installed (a compiled parser, several times faster on a
million-transfer algorithm), the standard library otherwise; the bytes on disk are JSON either way.

Whatever orjson refuses falls back to the standard library, so every value ``json`` writes is
written and every text ``json`` reads is read: values it cannot serialise (numpy scalars are converted; other objects, ints
beyond 64 bits) are written by ``json``, and text it will not parse (``NaN`` / ``Infinity``, which
files written before the rule below may hold) is read by ``json``. ``JSONDecodeError`` is the
standard library's, with its ``lineno`` and ``msg``.

Non-finite floats. What the workbench writes is standard JSON: a NaN or an infinity is written as
``null`` (what orjson writes), by either engine, never as the ``NaN`` / ``Infinity`` tokens that
strict parsers refuse. ``finite`` makes that copy of a value for writers that call ``json``
themselves, and ``text`` is ``json.dumps`` with that copy (what the commands write and print).
"""

from __future__ import annotations

import json
import math
from json import JSONDecodeError
from typing import Any, Iterator

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the fallback is exercised by tests through ENGINE
    _orjson = None

__all__ = ["loads", "dumps", "JSONDecodeError", "ENGINE", "scalars", "finite", "text"]

ENGINE = "orjson" if _orjson is not None else "json"


def loads(data: bytes | str) -> Any:
    """Parse JSON text or bytes with orjson when installed; ``json`` decides whatever orjson refuses."""
    if ENGINE == "orjson":
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # NaN / Infinity tokens, or a real error: json decides, and names the line
    return json.loads(data)


def _default(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars (TACCL records numpy floats in meta)
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces), UTF-8, standard: a NaN or an infinity is written as null by
    either engine (module docstring). Floats are written shortest-first by either engine,
    so the text may differ ("1e-6" against "1e-06") but parses to the same numbers."""
    if ENGINE == "orjson":
        try:
            return _orjson.dumps(value, default=_default,
                                 option=_orjson.OPT_SERIALIZE_NUMPY | _orjson.OPT_NON_STR_KEYS)
        except TypeError:
            pass
    try:
        return json.dumps(value, separators=(",", ":"), default=_default, allow_nan=False).encode()
    except ValueError as exc:
        if not str(exc).startswith("Out of range float"):  # a circular reference, not a NaN
            raise
    return json.dumps(finite(value), separators=(",", ":"), default=_default, allow_nan=False).encode()


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity (numpy's too) replaced by None, in a copy of its
    objects and arrays (tuples become lists, as JSON writes them); other values as they are."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays: their Python values
    if callable(tolist) and not isinstance(value, (str, bytes, int)):
        return finite(tolist())
    return value


def text(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` (``indent``, ``sort_keys``, ...) as standard JSON: every NaN
    and infinity written as null (``finite``), never as a token strict parsers refuse."""
    return json.dumps(finite(value), allow_nan=False, **options)


def scalars(value: Any) -> Iterator[Any]:
    """Every value in a nested JSON-like value that is not an object or an array (any order)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            yield item
