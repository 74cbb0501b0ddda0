"""Entry points of the installed distributions, read through ``importlib.metadata``.

Formulations (``workbench.formulations``) and commands (``workbench.commands``) are found this way.
The module ``importlib.metadata`` costs a command about 30 ms to import, so it is imported on the
first call; every command builds its parser with the plug-in commands, so every command pays it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["entry_points"]


def entry_points(group: str) -> list[Any]:
    """The installed entry points of ``group`` (``importlib.metadata.EntryPoint`` objects)."""
    from importlib.metadata import entry_points as installed

    return list(installed(group=group))
