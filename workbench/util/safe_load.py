"""Reading user files safely: configs, topologies, sketches, demands, plans.

Every reader of a file a user names goes through here, so each kind of hostile or broken input is
one line naming the file (exit 2 at the command line), never a hang, a memory blow-up or a
traceback:

* ``read_input``: the file must be a regular file (a FIFO, a device, a folder or a socket is
  refused before it is opened, so reading never blocks), exist, fit the size guard's budget by its
  length before a byte is read (``read_bytes`` alone, for readers that parse the bytes themselves),
  and be UTF-8 text (``refuse_special`` is the first of these alone);
* ``parse_yaml``: PyYAML's safe loader, refusing a duplicate mapping key (named by its key path and
  line: ``topo.yaml: links: duplicate key (line 7)``), nesting deeper than ``MAX_DEPTH`` levels,
  an alias that contains itself, aliases that expand the document by more than ``MAX_ALIAS_NODES``
  nodes (a "billion laughs" file of 600 bytes), and integers with more digits than Python reads;
* ``parse_json``: the same refusals for JSON (duplicate keys by path, depth, long integers);
* ``load_file``: ``read_input`` then one of the two, by the file's suffix or as asked;
* ``boolean`` / ``number``: typed reading of a field, so ``"no"`` is not true and ``true`` is not 1.

Each function raises the caller's own error type (``error=TopologyError``, ``ConfigError``, ...)
so messages stay those of the reader; ``InputError`` is the default.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["InputError", "read_input", "read_bytes", "describe_mode", "refuse_special", "parse_yaml", "parse_json", "load_file", "boolean", "number",
           "shorten", "MAX_DEPTH", "MAX_ALIAS_NODES"]

MAX_DEPTH = 100  # nesting levels; no input of the workbench comes near, and recursive readers stay safe
MAX_ALIAS_NODES = 10**6  # nodes YAML aliases may add to a document as it is expanded

ErrorType = Callable[[str], Exception]


class InputError(ValueError):
    """An input file that cannot be read as what it should be; one line naming the file."""


def shorten(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, so a message about a huge value stays one short line."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ------------------------------------------------------------------------------------ reading
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def describe_mode(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words: "a regular file", "a folder", "a FIFO (named
    pipe)", "a device", "a socket" (a link is the caller's to tell: ``stat`` follows it)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((words for test, words in _KINDS if test(mode)), "a special file")


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    return None if stat.S_ISREG(mode) else describe_mode(mode)


def refuse_special(path: str | Path, error: ErrorType = InputError) -> None:
    """``error`` when ``path`` exists and is not a regular file (a FIFO would block the read, a
    device never end it); a missing or unreadable path is left to the caller's own read. For readers
    that read the bytes themselves (the algorithm files' fast path)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    kind = _not_regular(mode)
    if kind:
        raise error(f"{path}: is {kind}, not a file")


def read_input(path: str | Path, what: str = "file", error: ErrorType = InputError,
               per_byte: float | None = None) -> str:
    """The text of the regular file ``path``; ``error`` (one line naming the file) when it is
    missing, not a regular file, over the size guard, unreadable or not UTF-8. ``what`` names it:
    "topology file". ``per_byte``: the bytes of memory a byte of it takes once parsed and used
    (``size_guard.BYTES_PER_PARSED_BYTE`` by default)."""
    data = read_bytes(path, what, error, per_byte)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not a text file (byte {exc.start} is not utf-8)") from None


def read_bytes(path: str | Path, what: str = "file", error: ErrorType = InputError,
               per_byte: float | None = None) -> bytes:
    """The bytes of the regular file ``path``, sized before they are read.

    Refused with ``error`` (one line naming the file), before anything is read: a missing path, a
    FIFO, device, folder or socket (opening a FIFO for reading blocks until a writer comes), and a
    file whose length times ``per_byte`` exceeds the size guard's budget (a 5 GB sparse file is
    refused, not read). The file is opened without blocking and checked again on the descriptor (the
    name may have been swapped meanwhile), and never more than the guarded length is read (a file
    that grows while it is read is refused too)."""
    from workbench.util import size_guard

    path = Path(path)
    factor = size_guard.BYTES_PER_PARSED_BYTE if per_byte is None else per_byte
    limit = size_guard.budget()  # asked once: without --max-memory it reads the process's limits
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise error(f"{path}: no such {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError:  # a NUL byte in the name
        raise error(f"{shorten(str(path))}: not a file name") from None
    _refuse_kind(path, info.st_mode, error)
    _refuse_length(path, info.st_size, factor, limit, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        _refuse_kind(path, info.st_mode, error)
        _refuse_length(path, info.st_size, factor, limit, error)
        try:
            data = _read_guarded(handle, info.st_size, path, factor, error, limit)
        except OSError as exc:
            raise error(f"{path}: cannot read ({exc.strerror})") from None
    return data


def _read_guarded(handle: Any, length: int, path: Path, per_byte: float, error: ErrorType,
                  limit: float | None = None) -> bytes:
    """The file's ``length`` bytes, and what it grew by meanwhile, read a block at a time while the
    whole stays within the guard (a file grown without end is refused, not read to the end)."""
    from workbench.util import size_guard

    limit = size_guard.budget() if limit is None else limit
    parts = [handle.read(length)]
    total = len(parts[0])
    while True:
        block = handle.read(_BLOCK)
        if not block:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        total += len(block)
        _refuse_length(path, total, per_byte, limit, error, grew=True)
        parts.append(block)


_BLOCK = 1 << 20  # bytes read at a time past a file's stated length


def _refuse_kind(path: Path, mode: int, error: ErrorType) -> None:
    kind = _not_regular(mode)
    if kind:
        raise error(f"{path}: is {kind}, not a file")


def _refuse_length(path: Path, length: int, per_byte: float, limit: float, error: ErrorType,
                   grew: bool = False) -> None:
    """The size guard on a file's length, before it is read (``per_byte``: memory per byte of file;
    ``limit``: the budget, asked once per file)."""
    needed = float(length) * per_byte
    if needed > limit:
        from workbench.util.size_guard import readable

        state = "grew while it was read, past" if grew else "is"
        raise error(f"{path}: {state} {readable(float(length))}, which needs an estimated {readable(needed)} of "
                    f"memory to read, over the {readable(limit)} budget (--max-memory raises it)")


def load_file(path: str | Path, what: str = "file", error: ErrorType = InputError, syntax: str | None = None) -> Any:
    """``read_input`` then ``parse_json`` (``syntax="json"``, or a ``.json`` name when ``syntax`` is
    None) or ``parse_yaml`` (anything else)."""
    from workbench.util import size_guard

    json_text = syntax == "json" or (syntax is None and Path(path).suffix.lower() == ".json")
    per_byte = size_guard.BYTES_PER_PARSED_BYTE if json_text else size_guard.BYTES_PER_YAML_BYTE
    text = read_input(path, what, error, per_byte)
    if json_text:
        return parse_json(text, str(path), error)
    return parse_yaml(text, str(path), error)


# ------------------------------------------------------------------------------------ YAML
def _yaml_loader() -> type:
    """The safe loader with the refusals of this module (built on first use: PyYAML loads lazily)."""
    global _LOADER, _REFUSED
    if _LOADER is not None:
        return _LOADER
    import yaml
    from yaml.composer import ComposerError

    class Refused(ComposerError):
        """Well-formed YAML this loader will not read (too deep, an integer too long)."""

    class Loader(yaml.SafeLoader):
        """``yaml.SafeLoader`` that bounds nesting while composing (PyYAML recurses per level) and
        refuses integers Python will not convert."""

        _depth = 0

        def fetch_flow_collection_start(self, token_class: type) -> None:
            # the scanner runs ahead of the composer, keeping a possible key per open bracket for up
            # to 1024 characters: refusing deep brackets here keeps that look-ahead small
            if self.flow_level >= MAX_DEPTH:
                raise Refused(None, None, f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                return super().compose_node(parent, index)
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise Refused(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                  self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_yaml_int(self, node: Any) -> int:
            try:
                return super().construct_yaml_int(node)
            except ValueError:  # Python's limit on the digits of an integer read from text
                raise Refused(None, None, f"an integer of {len(node.value):,} characters is too long",
                              node.start_mark) from None

    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    _LOADER, _REFUSED = Loader, Refused
    return Loader


_LOADER: type | None = None
_REFUSED: type = Exception  # the loader's refusal type (well-formed YAML it will not read), once built


def parse_yaml(text: str, source: str, error: ErrorType = InputError, raw_on_syntax_error: bool = False) -> Any:
    """The YAML document in ``text`` (``source`` names it in messages), with every refusal of the
    module docstring. ``raw_on_syntax_error``: text that is not YAML at all is returned as written
    (``--set key=value`` takes such a value as a string); the refusals still apply."""
    import yaml

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(node, source, error)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        refused = isinstance(exc, _REFUSED)
        if raw_on_syntax_error and not refused:
            return text
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = exc.problem or exc.context or "malformed"
        if refused:
            raise error(f"{source}: {problem}{where}") from None
        raise error(f"{source}: malformed file: YAML syntax error{where}: {problem}") from None
    except yaml.YAMLError as exc:
        if raw_on_syntax_error:
            return text
        raise error(f"{source}: malformed file: {(str(exc).splitlines() or ['YAML error'])[0]}") from None
    finally:
        loader.dispose()


def _yaml_path(path: str, key: Any) -> str:
    """``grid.links``: a key path as the config messages spell it."""
    from yaml.nodes import ScalarNode

    name = key.value if isinstance(key, ScalarNode) else "?"
    return f"{path}.{name}" if path else str(name)


def _check_yaml_nodes(root: Any, source: str, error: ErrorType) -> None:
    """Duplicate keys, self-containing aliases and the expanded size and depth of a composed
    document, over the node graph (an alias is the node it names, so each node is visited once and
    its expanded size and depth memoised: the check costs the file's size, not the expansion's)."""
    from yaml.nodes import MappingNode, ScalarNode

    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
    open_nodes: set[int] = set()  # on the current path: meeting one again is an alias that contains itself
    stack: list[tuple[Any, str, bool]] = [(root, "", False)]
    while stack:
        node, path, finished = stack.pop()
        key = id(node)
        if finished:
            children = _yaml_children(node)
            sizes = [done[id(child)] for child, _ in children]
            size = 1 + sum(s for s, _ in sizes)
            depth = 1 + max((d for _, d in sizes), default=0)
            if depth > MAX_DEPTH:
                raise error(f"{source}: {_cut(path) or 'the document'}: nested deeper than {MAX_DEPTH} levels "
                            f"(aliases included, line {node.start_mark.line + 1})")
            done[key] = (size, depth)
            open_nodes.discard(key)
            continue
        if key in done:
            continue
        if key in open_nodes:
            raise error(f"{source}: {_cut(path) or 'the document'}: an alias that contains itself "
                        f"(line {node.start_mark.line + 1})")
        open_nodes.add(key)
        if isinstance(node, MappingNode):
            seen: set[tuple[str, str]] = set()
            for name, _ in node.value:
                if isinstance(name, ScalarNode) and name.tag != "tag:yaml.org,2002:merge":
                    if (name.tag, name.value) in seen:
                        raise error(f"{source}: {_cut(_yaml_path(path, name))}: duplicate key "
                                    f"(line {name.start_mark.line + 1})")
                    seen.add((name.tag, name.value))
        stack.append((node, path, True))
        for child, child_path in reversed(_yaml_children(node, path)):
            if id(child) not in done:
                stack.append((child, child_path, False))
    expanded = done[id(root)][0]
    if expanded - len(done) > MAX_ALIAS_NODES:
        raise error(f"{source}: aliases expand the document to {_count(expanded)} nodes (more than "
                    f"{MAX_ALIAS_NODES:,} beyond the {len(done):,} written); refused")


def _count(value: int) -> str:
    """A node count in words, even one with more digits than Python prints."""
    return f"{value:,}" if value < 10**15 else f"about 10^{int(math.log10(value))}"


def _yaml_children(node: Any, path: str = "") -> list[tuple[Any, str]]:
    """The child nodes of ``node`` with their key paths (a mapping's keys and values both count)."""
    from yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, SequenceNode):
        return [(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
    if isinstance(node, MappingNode):
        children = []
        for name, value in node.value:
            children.append((name, path))
            children.append((value, _yaml_path(path, name)))
        return children
    return []


# ------------------------------------------------------------------------------------ JSON
class _Duplicated(dict):
    """An object that had a key twice (marked while parsing; its path is found afterwards)."""

    duplicate: str = ""


def _pairs(items: list[tuple[str, Any]]) -> dict:
    data = dict(items)
    if len(data) == len(items):
        return data
    seen: set[str] = set()
    marked = _Duplicated(data)
    for name, _ in items:
        if name in seen:
            marked.duplicate = name
            break
        seen.add(name)
    return marked


def parse_json(text: str | bytes, source: str, error: ErrorType = InputError) -> Any:
    """The JSON document in ``text`` (``source`` names it), refusing duplicate keys (named by key
    path), nesting deeper than ``MAX_DEPTH`` and integers with more digits than Python reads."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise error(f"{source}: malformed file: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                    f"{exc.msg})") from None
    except RecursionError:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # the one other refusal of json: an integer with more digits than Python converts
        raise error(f"{source}: malformed file: an integer has more than {sys.get_int_max_str_digits():,} "
                    "digits") from None
    _check_json_tree(data, source, error)
    return data


def _check_json_tree(data: Any, source: str, error: ErrorType) -> None:
    """Depth and duplicate keys, walked without recursion; paths are built only for a message."""
    stack: list[tuple[Any, int, tuple | None]] = [(data, 1, None)]  # (value, depth, (parent path, key))
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise error(f"{source}: {_json_path(where) or 'the document'}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            if type(value) is _Duplicated:
                raise error(f"{source}: {_json_path((where, value.duplicate))}: duplicate key")
            items = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        for name, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, (where, name)))


def _json_path(where: tuple | None) -> str:
    """``gpus[0].threadblocks[2]`` from the (parent, key) chain."""
    parts = []
    while where is not None:
        where, name = where
        parts.append(f"[{name}]" if isinstance(name, int) else f".{name}")
    return _cut("".join(reversed(parts)).lstrip("."))


def _cut(path: str) -> str:
    """A key path cut to 80 characters: one 100 levels deep, or with a huge key, is no help in full."""
    return path if len(path) <= 80 else path[:77] + "..."


# ------------------------------------------------------------------------------------ typed fields
def boolean(value: Any, where: str, error: ErrorType = InputError) -> bool:
    """``value`` if it is ``true`` or ``false``; else ``error`` naming ``where`` (a string such as
    "no" is not read as a truth value)."""
    if not isinstance(value, bool):
        raise error(f"{where}: expected true or false, got {shorten(value)}")
    return value


def number(value: Any, where: str, error: ErrorType = InputError, minimum: float | None = None,
           integer: bool = False) -> float | int:
    """``value`` if it is a finite number (an integer when ``integer``), at least ``minimum``; else
    ``error`` naming ``where``. A boolean is not a number."""
    kinds = int if integer else (int, float)
    word = "an integer" if integer else "a finite number"
    if isinstance(value, bool) or not isinstance(value, kinds) or (isinstance(value, float)
                                                                   and not math.isfinite(value)):
        raise error(f"{where}: expected {word}, got {shorten(value)}")
    if minimum is not None and value < minimum:
        raise error(f"{where}: expected {word} >= {minimum:g}, got {shorten(value)}")
    return value
