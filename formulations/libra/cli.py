"""``workbench libra``: LIBRA's per-dimension bandwidth of a multi-dimensional network.

Registered through the ``workbench.commands`` entry points (``libra = "formulations.libra.cli:register"``).
Only argparse at the top: building the command line imports this module for every command, so
the rest is imported when ``libra`` itself runs.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``libra`` to the ``workbench`` parser."""
    p = sub.add_parser("libra", help="LIBRA: per-dimension bandwidth of a multi-dimensional network")
    p.add_argument("--network", required=True, help="network YAML (Topology, NpusCount, CostDimension)")
    p.add_argument("--workload", required=True, action="append", help="workload trace (repeatable)")
    p.add_argument("--communicator", required=True, action="append", help="communicator YAML, one per workload")
    p.add_argument("--cost", required=True, help="cost model YAML ($ per GB/s per label)")
    p.add_argument("--budget", required=True, help="total bandwidth per NPU, e.g. 1000GB/s")
    p.add_argument("--objective", choices=["perf", "perf-per-cost"], default="perf")
    p.add_argument("--backend", choices=["highs", "scipy"], default="highs")
    p.add_argument("--time-limit", default="60s")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_libra)


def _cmd_libra(args: argparse.Namespace) -> int:
    from workbench.plugin import call
    from formulations.libra import Libra
    from workbench.cli.common import UsageError
    from workbench.plugin.registry import DesignProblem
    from workbench.util import fastjson
    from workbench.util.units import UnitError, format_time, parse_bandwidth, parse_time

    try:
        budget = parse_bandwidth(args.budget) / 1e9
    except UnitError as exc:
        raise UsageError(f"--budget: {exc}") from None
    if budget <= 0:
        raise UsageError("--budget must be positive")
    if len(args.workload) != len(args.communicator):
        raise UsageError("give one --communicator per --workload")
    workloads = [{"workload": w, "communicator": c} for w, c in zip(args.workload, args.communicator)]
    problem = DesignProblem(dimensions={"file": args.network}, workloads=workloads, cost_model={"file": args.cost},
                            constraints={"total_bandwidth": budget}, objective=args.objective)
    try:
        result = call.synthesize(Libra(), problem, time_limit=parse_time(args.time_limit), seed=0,
                                 backend=args.backend)
    except ValueError as exc:  # DesignInputError is a ValueError
        raise UsageError(str(exc)) from None
    stats = result.stats
    if args.json:
        print(fastjson.text({"bandwidth": stats["bandwidth_gbps"], "time": result.time, "cost": result.cost,
                             "status": result.status, "speedup_vs_equal_bw": stats["speedup"],
                             "perf_per_cost_gain_vs_equal_bw": stats["perf_per_cost_gain"]}))
        return 0
    print(f"objective        {args.objective} ({result.status}, {result.wall_seconds:.3f} s)")
    print("bandwidth        " + ", ".join(f"{b:.2f}" for b in stats["bandwidth_gbps"]) + " GB/s per NPU, dims 1..N")
    print(f"training time    {format_time(result.time)}   (EqualBW {format_time(stats['equal_bw_time_ns'] * 1e-9)})")
    print(f"network cost     ${result.cost:,.0f}   (EqualBW ${stats['equal_bw_cost']:,.0f})")
    print(f"speedup          {stats['speedup']:.3f}x vs EqualBW")
    print(f"perf per cost    {stats['perf_per_cost_gain']:.2f}x vs EqualBW")
    return 0
