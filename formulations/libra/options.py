"""LIBRA's options: the one declaration of its parameters (``workbench.plugin.parameters``)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.plugin.parameters import Options, option

__all__ = ["LibraOptions"]


@dataclass(frozen=True)
class LibraOptions(Options):
    """Which solver designs the network."""

    backend: str = option("highs", "HiGHS LP recipe or scipy's smooth form", choices=("highs", "scipy"))
