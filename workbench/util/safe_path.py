"""No code from where a command is started: ``sys.path`` without the current folder.

``python -m`` and ``python -c`` put the folder they are started in first on ``sys.path``, so a
stray ``numpy.py`` or ``json.py`` there would run inside the command and inside every cell it
starts. ``workbench`` commands and their cells import from the installed packages only: cells
start with ``python -P`` and a ``PYTHONPATH`` from ``safe_sys_path`` (``workbench.run.monitor``),
a forked cell and ``python -m workbench`` clean their own ``sys.path`` with it. A formulation
module beside an experiment config is loaded by its file location instead
(``workbench.plugin.registry.resolve_formulation``).

Only ``os`` is imported here: ``python -m workbench`` calls this before importing anything else.
"""

from __future__ import annotations

import os

__all__ = ["safe_sys_path", "package_root"]


def package_root() -> str:
    """The folder that holds the ``workbench`` package (a checkout's top folder when run from one)."""
    here = os.path.dirname(os.path.realpath(__file__))  # workbench/util
    return os.path.dirname(os.path.dirname(here))


def safe_sys_path(paths: list[str]) -> list[str]:
    """``paths`` (a ``sys.path``) without the current folder.

    Dropped: ``''`` and relative entries (they mean whatever folder the process stands in) and the
    current folder itself. When that took away the folder holding the ``workbench`` package (run
    from a checkout that is the current folder), that folder goes back last, after the standard
    library and site-packages, so the package still imports and nothing beside it shadows a library.
    """
    here = os.path.realpath(os.getcwd())
    root = package_root()
    kept: list[str] = []
    lost_root = False
    for entry in paths:
        real = os.path.realpath(entry or ".")
        if not entry or not os.path.isabs(entry) or real == here:
            lost_root |= real == root
            continue
        kept.append(entry)
    if lost_root and root not in {os.path.realpath(k) for k in kept}:
        kept.append(root)
    return list(dict.fromkeys(kept))
