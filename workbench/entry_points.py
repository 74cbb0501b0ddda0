"""Entry points of one group, read straight from the installed distributions' ``entry_points.txt``.

The same files and the same rules as ``importlib.metadata.entry_points(group=...)``: every
``*.dist-info`` or ``*.egg-info`` folder on ``sys.path``, the first distribution of a name winning,
``[group]`` sections of ``name = module:attribute [extras]`` lines. Importing
``importlib.metadata`` costs a command about 30 ms (it pulls in the email package), a tenth of a
small ``workbench synth``; this reader needs none of it. A test holds it to ``importlib.metadata``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, NamedTuple

__all__ = ["EntryPoint", "entry_points"]

_INFO = re.compile(r"^(?P<name>[^-]+)(-[^-]*)?\.(dist|egg)-info$", re.IGNORECASE)


class EntryPoint(NamedTuple):
    name: str
    value: str  # "module:attribute [extras]"
    group: str

    def load(self) -> Any:
        """The object the entry point names (as ``importlib.metadata.EntryPoint.load``)."""
        module_name, _, attribute = self.value.partition(":")
        target = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.split("[")[0].strip().split(".")):
            target = getattr(target, part)
        return target


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _info_folders():
    """Every distribution's metadata folder on ``sys.path``, the first of each name only."""
    seen = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            match = _INFO.match(name)
            if match and _normalised(match["name"]) not in seen:
                seen.add(_normalised(match["name"]))
                yield os.path.join(entry or ".", name)


def _sections(text: str):
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section is not None and "=" in line:
            name, _, value = line.partition("=")
            yield section, name.strip(), value.strip()


def entry_points(group: str) -> list[EntryPoint]:
    found = []
    for folder in _info_folders():
        try:
            with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        found += [EntryPoint(name, value, group) for section, name, value in _sections(text) if section == group]
    return found
