"""The ``workbench`` command line (also ``python -m workbench``).

Exit codes: 0 success, 1 an algorithm that is not valid (``verify``), 2 bad input (unknown
builder, malformed file, missing field, bad argument), always as one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from workbench.algorithm import Algorithm, AlgorithmFormatError, load_algorithm
from workbench.collective import CollectiveError, make_collective
from workbench.topology import BUILDERS, Topology, TopologyError, load_topology
from workbench.units import UnitError, format_time, parse_bandwidth, parse_size, parse_time

__all__ = ["main", "UsageError", "topology_from_args", "add_topology_arguments"]


class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(f"{self.prog}: {message}")


def _comma_list(text: str | None, parse, what: str) -> list[float] | None:
    if text is None:
        return None
    try:
        return [parse(part) for part in text.split(",") if part.strip()]
    except UnitError as exc:
        raise UsageError(f"--{what}: {exc}") from None


def add_topology_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument("--topology", required=required,
                        help="builder spec (e.g. ring:8, md:R2,F4,S8, dgx1) or a .yaml/.json topology file")
    parser.add_argument("--alpha", help="link latency per dimension, comma separated (e.g. 0.5us or 0.5us,1us)")
    parser.add_argument("--bandwidth", help="link bandwidth per dimension, comma separated (e.g. 50GB/s)")


def topology_from_args(spec: str, alpha: str | None, bandwidth: str | None) -> Topology:
    alphas = _comma_list(alpha, parse_time, "alpha")
    bandwidths = _comma_list(bandwidth, parse_bandwidth, "bandwidth")
    if bandwidths is not None and any(b <= 0 for b in bandwidths):
        raise UsageError(f"--bandwidth: must be positive, got {bandwidth!r}")
    return load_topology(spec, alphas, bandwidths)


def _load(path: str, args: argparse.Namespace) -> Algorithm:
    algorithm = load_algorithm(path)
    if getattr(args, "topology", None):
        physical = topology_from_args(args.topology, args.alpha, args.bandwidth)
        if physical.num_npus != algorithm.topology.num_npus:
            raise UsageError(f"--topology has {physical.num_npus} NPUs but {path} was made for "
                             f"{algorithm.topology.num_npus}")
        algorithm.topology = physical
    return algorithm


# ------------------------------------------------------------------ commands
def _cmd_topology(args: argparse.Namespace) -> int:
    topology = topology_from_args(args.spec, args.alpha, args.bandwidth)
    if args.json:
        print(json.dumps(topology.to_dict(), indent=1))
    elif args.output:
        topology.save(args.output)
        print(f"wrote {args.output}")
    else:
        print(topology.describe())
    return 0


def _cmd_builders(args: argparse.Namespace) -> int:
    width = max(map(len, BUILDERS))
    for spec, text in BUILDERS.items():
        print(f"{spec:<{width}}  {text}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from workbench.verify import InvalidAlgorithm, verify

    algorithm = _load(args.file, args)
    try:
        report = verify(algorithm)
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr if not args.json else sys.stdout)
        if args.json:
            print(json.dumps({"valid": False, "reason": str(exc), "transfer": exc.transfer, "chunk": exc.chunk,
                              "ranks": list(exc.ranks), "kind": exc.kind}))
        return 1
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(f"valid: {algorithm.collective.describe()}; {report.transfers} transfers, "
              f"{report.delivered_pairs} (chunk, rank) postconditions met")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from workbench.bounds import lower_bounds
    from workbench.simulate import simulate
    from workbench.verify import InvalidAlgorithm, verify

    algorithm = _load(args.file, args)
    default = simulate(algorithm)
    try:
        verify(algorithm, simulation=default)
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr)
        return 1
    options = dict(link_model=args.link_model, order=args.order, switch_model=args.switch_model)
    result = default if options == default.options else simulate(algorithm, **options)
    bounds = lower_bounds(algorithm.topology, algorithm.collective, algorithm.chunk_bytes,
                          lp=len(algorithm.topology.links) * algorithm.collective.num_chunks <= 20000)
    summary = result.summary()
    summary.update(bound=bounds.best, efficiency=bounds.efficiency(result.collective_time), ideal=bounds.ideal,
                   claimed_time=algorithm.meta.get("claimed_time"))
    if args.json:
        data = result.to_dict(per_transfer=args.per_transfer) if args.per_transfer or args.links else summary
        data.update({k: summary[k] for k in ("bound", "efficiency", "ideal", "claimed_time")})
        print(json.dumps(data))
        return 0
    claimed = summary["claimed_time"]
    print(f"{algorithm.collective.describe()} on {algorithm.topology.name}")
    print(f"  collective time  {format_time(result.collective_time)}"
          + (f"   (claimed by the formulation: {format_time(claimed)})" if claimed is not None else ""))
    print(f"  algbw            {summary['algbw']:.4g} GB/s")
    print(f"  busbw            {summary['busbw']:.4g} GB/s")
    print(f"  lower bound      {format_time(bounds.best)}  (efficiency {summary['efficiency']:.1%})")
    print(f"  TACOS ideal      {format_time(bounds.ideal)}")
    print(f"  max link use     {summary['max_link_utilisation']:.1%}")
    print(f"  model            {args.link_model}, {args.order}, {args.switch_model}")
    return 0


def _cmd_bounds(args: argparse.Namespace) -> int:
    from workbench.bounds import lower_bounds

    topology = topology_from_args(args.topology, args.alpha, args.bandwidth)
    try:
        size = parse_size(args.size)
    except UnitError as exc:
        raise UsageError(f"--size: {exc}") from None
    ranks = args.ranks or topology.num_npus
    collective = make_collective(args.collective, ranks, args.chunks, args.root)
    collective.check_reachable(topology)
    bounds = lower_bounds(topology, collective, collective.chunk_bytes(size))
    if args.json:
        print(json.dumps(bounds.to_dict()))
    else:
        for key, value in bounds.to_dict().items():
            print(f"{key:<10} {format_time(value) if value is not None else '-'}")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description="Collective-algorithm synthesis workbench")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("topology", help="describe a topology (builder spec or file)")
    p.add_argument("spec", help="builder spec (see `workbench builders`) or a .yaml/.json file")
    p.add_argument("--alpha")
    p.add_argument("--bandwidth")
    p.add_argument("--json", action="store_true", help="print the {nodes, links} document")
    p.add_argument("-o", "--output", help="write the topology to a .yaml/.json file")
    p.set_defaults(func=_cmd_topology)

    p = sub.add_parser("builders", help="list the topology builders")
    p.set_defaults(func=_cmd_builders)

    p = sub.add_parser("verify", help="check that an algorithm file implements its collective")
    p.add_argument("file")
    add_topology_arguments(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("simulate", help="verify, then time an algorithm file")
    p.add_argument("file")
    add_topology_arguments(p)
    p.add_argument("--link-model", choices=["pipelined", "blocking"], default="pipelined")
    p.add_argument("--order", choices=["in-order", "fifo"], default="in-order")
    p.add_argument("--switch-model", choices=["cut-through", "store-and-forward"], default="cut-through")
    p.add_argument("--json", action="store_true", help="print a JSON object (times in s, bandwidths in GB/s)")
    p.add_argument("--links", action="store_true", help="with --json: per-link busy time and bytes")
    p.add_argument("--per-transfer", action="store_true", help="with --json: per-transfer start and end")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("bounds", help="lower bounds and TACOS's ideal for a problem")
    add_topology_arguments(p, required=True)
    p.add_argument("--collective", required=True)
    p.add_argument("--size", required=True, help="nccl-tests size, e.g. 1GiB")
    p.add_argument("--chunks", type=int, default=1, help="chunks per rank")
    p.add_argument("--ranks", type=int, help="ranks (default: every NPU)")
    p.add_argument("--root", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_bounds)

    return parser


_INPUT_ERRORS = (UsageError, TopologyError, CollectiveError, AlgorithmFormatError, UnitError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except _INPUT_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
