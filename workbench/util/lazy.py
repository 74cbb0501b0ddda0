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
from typing import Any, Callable

__all__ = ["lazy_module", "forward_attributes"]


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, imported when one of its attributes is first read (as it is when already
    imported); ImportError when no such module exists."""
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


def forward_attributes(implementation: str) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) that hands out the names of ``implementation``,
    imported on first use: ``__getattr__ = forward_attributes("formulations.sccl.synthesis")``
    keeps ``from formulations.sccl import solve_instance`` working while listing the package
    loads only its light ``__init__``."""

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(implementation)  # not ``from package import``: that would recurse
        try:
            return getattr(module, name)
        except AttributeError:
            package = implementation.rpartition(".")[0]
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
