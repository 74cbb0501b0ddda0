"""Modules loaded on first use, so that listing formulations or parsing a command line does not
pay for numpy (about 0.1 s) in a process that never computes anything.

``numpy = lazy_module("numpy")`` gives a module object that imports for real the first time one
of its attributes is read; from then on it is the ordinary module (the standard library's
``importlib.util.LazyLoader``), so hot loops pay nothing. A module already imported is returned
as it is.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["lazy_module"]


def lazy_module(name: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
