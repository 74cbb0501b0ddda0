"""Algorithm files: read (refused unread when not a regular file of a sane size; large ones on the
typed fast path of ``workbench.model.typed_load`` when msgspec is installed) and written atomically.

The document inside is ``workbench.model.algorithm_format``'s. Both ways run without the cyclic
garbage collector (``no_cyclic_gc``): a million transfers are millions of new objects, which every
collection would rescan.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from itertools import starmap
from pathlib import Path
from typing import Any

from workbench.util import fastjson
from workbench.util.files import write_output
from workbench.model.algorithm_format import AlgorithmFields, AlgorithmFormatError, read_document
from workbench.model.transfer import Transfer

__all__ = ["TYPED_FROM_BYTES", "no_cyclic_gc", "read_file", "write_file"]

TYPED_FROM_BYTES = 1 << 20  # below a megabyte the usual reader is as fast, without importing msgspec


@contextmanager
def no_cyclic_gc():
    """No cyclic collection while a document is built or read: a million transfers are millions of
    new objects, which each collection would rescan (most of a large load's time)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def write_file(algorithm: Any, path: str | Path) -> None:
    """Write ``algorithm``'s document (its ``to_dict``) atomically, so a reader never sees half a
    file (a character device such as /dev/null is written through; ``workbench.util.files.OutputError``
    names a path that cannot take the file)."""
    with no_cyclic_gc():
        document = algorithm.to_dict()
        text = fastjson.dumps(document)  # an infinity in meta (a solver's bound) is written as null
    write_output(path, text)


def read_file(path: str | Path) -> AlgorithmFields:
    """The algorithm of a ``workbench.algorithm/1`` to ``/4`` JSON file, as its fields;
    ``AlgorithmFormatError`` names what is wrong."""
    with no_cyclic_gc():
        return _load(Path(path))


def _load(path: Path) -> AlgorithmFields:
    from workbench.util.safe_load import read_bytes

    # a FIFO would block the read, a device never end it, a 5 GB file fill the memory: refused unread
    text = read_bytes(path, "algorithm file", AlgorithmFormatError)
    typed = _typed_decode(text)
    if typed is not None:
        document, fields = typed
        return read_document(document, str(path), list(starmap(Transfer, fields)))
    try:
        data = fastjson.loads(text)
    except fastjson.JSONDecodeError as exc:
        text.decode("utf-8")  # a binary file: UnicodeDecodeError, which callers report as "not a text file"
        raise AlgorithmFormatError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise  # a binary file: callers report it as "not a text file"
    except RecursionError:  # arrays or objects nested deeper than the parser's recursion allows
        raise AlgorithmFormatError(f"{path}: nested too deeply to be an algorithm file") from None
    except ValueError:  # the parser's one other refusal: an integer with more digits than Python converts
        raise AlgorithmFormatError(f"{path}: an integer has more digits than can be read") from None
    return read_document(data, str(path))


def _typed_decode(text: bytes) -> tuple[dict, list[tuple]] | None:
    """The fast reader for large well-formed files (``workbench.model.typed_load``), when msgspec is
    installed and the file is big enough for it to matter; None sends the text the usual way."""
    if len(text) < TYPED_FROM_BYTES:
        return None
    try:
        from workbench.model.typed_load import decode
    except ImportError:
        return None
    return decode(text)
