"""What every ``workbench`` subcommand shares: the one-line usage error and the topology arguments."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from workbench.util.units import UnitError, parse_bandwidth, parse_time

if TYPE_CHECKING:  # every command builds the parser; the topology package loads when one is used
    from workbench.topology import Topology

__all__ = ["UsageError", "Parser", "add_topology_arguments", "add_overhead_argument", "topology_from_args",
           "uniform_overhead", "at_least_two"]



class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        """Raise ``UsageError`` with ``message`` instead of printing the usage and exiting."""
        raise UsageError(f"{self.prog}: {message}")


def _comma_list(text: str | None, parse, what: str) -> list[float] | None:
    if text is None:
        return None
    try:
        return [parse(part) for part in text.split(",") if part.strip()]
    except UnitError as exc:
        raise UsageError(f"--{what}: {exc}") from None


def add_topology_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """Add ``--topology`` (builder spec or file) and the per-dimension ``--alpha``, ``--bandwidth`` and
    ``--overhead``."""
    parser.add_argument("--topology", required=required,
                        help="builder spec (e.g. ring:8, md:R2,F4,S8, dgx1) or a .yaml/.json topology file")
    parser.add_argument("--alpha", help="link latency per dimension, comma separated (e.g. 0.5us or 0.5us,1us)")
    parser.add_argument("--bandwidth", help="link bandwidth per dimension, comma separated (e.g. 50GB/s)")
    add_overhead_argument(parser)


def add_overhead_argument(parser: argparse.ArgumentParser) -> None:
    """``--overhead``: the per-message link overhead (docs/cost-model.md), given like ``--alpha``."""
    parser.add_argument("--overhead", help="per-message link overhead per dimension, comma separated "
                                           "(e.g. 1us; default 0)")


def topology_from_args(spec: str, alpha: str | None, bandwidth: str | None,
                       overhead: str | None = None) -> Topology:
    """The topology of ``--topology`` with the per-dimension ``--alpha``, ``--bandwidth`` and
    ``--overhead`` strings applied (``UsageError`` names a bad value)."""
    alphas = _comma_list(alpha, parse_time, "alpha")
    bandwidths = _comma_list(bandwidth, parse_bandwidth, "bandwidth")
    overheads = _comma_list(overhead, parse_time, "overhead")
    if bandwidths is not None and any(b <= 0 for b in bandwidths):
        raise UsageError(f"--bandwidth: must be positive, got {bandwidth!r}")
    from workbench.topology.builders import load_topology

    return load_topology(spec, alphas, bandwidths, overheads)


def uniform_overhead(topology: Topology, overhead: str | None) -> Topology:
    """``topology`` with one ``--overhead`` value on every link (an algorithm file's own topology,
    which has no dimensions to give a list to); unchanged without the option."""
    values = _comma_list(overhead, parse_time, "overhead")
    if values is None:
        return topology
    if len(values) != 1:
        raise UsageError(f"--overhead: without --topology give one value for every link, got {overhead!r}")
    return topology.with_uniform(overhead=values[0])


def at_least_two(ranks: int, topology: str) -> None:
    """Raise ``UsageError`` when the ``--topology`` given as ``topology`` has fewer than 2 ranks."""
    if ranks < 2:
        raise UsageError(f"--topology {topology}: a collective needs at least 2 ranks, this one has {ranks}")
