"""The ``workbench`` command line (also ``python -m workbench``).

Exit codes (the README's table): 0 done, 1 a well-formed algorithm that is not valid (``verify``,
``simulate``, ``export``, ``interpret``), 2 bad input (unknown builder, malformed or binary file,
missing field, bad argument, a busy run folder), 3/4/5 ``synth`` infeasible / timed out / failed,
5 also for any unexpected error (one line; ``--debug`` shows the traceback), 130 interrupted; errors
are one line on stderr. Run control lives in ``cli_runs``, the runtime
files (MSCCL XML, MSCCL++ plans) in ``cli_runtimes``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Sequence

from workbench.algorithm import Algorithm, AlgorithmFormatError, load_algorithm
from workbench.collective import CollectiveError, make_collective
from workbench.builders import BUILDERS
from workbench.topology import TopologyError
from workbench.units import UnitError, format_time, parse_bandwidth, parse_size, parse_time
from workbench.cli_common import (MAIN_ENTERED, Parser, UsageError, add_topology_arguments, at_least_two,
                                  topology_from_args)
from workbench.cli_runs import cmd_run
from workbench.cli_synth import cmd_synth
from workbench.cli_runtimes import cmd_export, cmd_import, cmd_interpret

__all__ = ["main", "UsageError", "topology_from_args", "add_topology_arguments"]


def _load(path: str, args: argparse.Namespace) -> Algorithm:
    from workbench import size_guard

    if os.path.isfile(path):  # parsed JSON and built transfers: ~30 bytes per byte of file
        size_guard.check(path, 30.0 * os.path.getsize(path))
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
    try:
        default = verify(algorithm).simulation  # the default simulation comes with the verdict
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr)
        return 1
    options = dict(link_model=args.link_model, order=args.order, switch_model=args.switch_model)
    result = default if options == default.options else simulate(algorithm, **options)
    bounds = lower_bounds(algorithm.topology, algorithm.collective, algorithm.chunk_bytes,
                          lp_time_limit=60.0, lp_max_variables=400_000)
    summary = result.summary()
    summary.update(bound=bounds.best, bound_exact=bounds.exact, efficiency=bounds.efficiency(result.collective_time),
                   achievable=bounds.achievable, ideal=bounds.ideal, claimed_time=algorithm.meta.get("claimed_time"))
    if args.json:
        data = result.to_dict(per_transfer=args.per_transfer) if args.per_transfer or args.links else summary
        data.update({k: summary[k] for k in ("bound", "bound_exact", "efficiency", "achievable", "ideal",
                                              "claimed_time")})
        print(json.dumps(data))
        return 0
    claimed = summary["claimed_time"]
    print(f"{algorithm.collective.describe()} on {algorithm.topology.name}")
    print(f"  collective time  {format_time(result.collective_time)}"
          + (f"   (claimed by the formulation: {format_time(claimed)})" if claimed is not None else ""))
    print(f"  algbw            {summary['algbw']:.4g} GB/s")
    print(f"  busbw            {summary['busbw']:.4g} GB/s")
    print(f"  {bounds.label:<16} {format_time(bounds.best)}  (efficiency {summary['efficiency']:.1%})")
    if bounds.achievable is not None:
        print(f"  RS* + AG*        {format_time(bounds.achievable)}  (best known achievable, not a bound)")
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
    at_least_two(ranks, args.topology)
    collective = make_collective(args.collective, ranks, args.chunks, args.root)
    collective.check_reachable(topology)
    bounds = lower_bounds(topology, collective, collective.chunk_bytes(size), lp_time_limit=300.0)
    if args.json:
        print(json.dumps(bounds.to_dict()))
        return 0
    explain = {"injection": "each rank's own links", "latency": "alpha path + one chunk",
               "cut": "enumerated or sweep cuts", "flow_lp": "multi-commodity flow LP",
               "optimum": "exact max-flow optimum + cut alpha", "splitting_cut": "M / weakest NPU-splitting cut",
               "gossip": "2(N-1)M / total link bandwidth (no switches)",
               "achievable": "RS* + AG*: best known achievable, not a bound",
               "ideal": "TACOS's Ideal metric, not a bound"}
    for key, value in bounds.to_dict().items():
        if key in ("exact", "label", "notes"):
            continue
        if key == "best":
            print(f"{'best':<14} {format_time(value)}  ({bounds.label})")
            continue
        shown = format_time(value) if value is not None else "-"
        print(f"{key:<14} {shown:<12} {explain.get(key, '')}")
    for key, note in bounds.notes.items():
        print(f"note: {key}: {note}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from workbench.run_folder import write_report

    table = write_report(args.folder, figures=not args.no_figures)
    print(table.read_text())
    return 0


def _cmd_rebound(args: argparse.Namespace) -> int:
    from workbench.rebound import rebound_run
    from workbench.report import ReportError

    try:
        refreshed, kept = rebound_run(args.folder)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print(f"{args.folder}: bounds refreshed in {refreshed} row(s), {kept} left as they were; report rewritten")
    return 0


def _cmd_libra(args: argparse.Namespace) -> int:
    from workbench.registry import DesignProblem, FormulationError, get_formulation

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
        formulation = get_formulation("libra")
        result = formulation.synthesize(problem, time_limit=parse_time(args.time_limit), seed=0,
                                        backend=args.backend)
    except (ValueError, FormulationError) as exc:  # DesignInputError is a ValueError
        raise UsageError(str(exc)) from None
    stats = result.stats
    if args.json:
        print(json.dumps({"bandwidth": stats["bandwidth_gbps"], "time": result.time, "cost": result.cost,
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


def _build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="workbench", description="Collective-algorithm synthesis workbench")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)

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

    p = sub.add_parser("synth", help="run one formulation and write its algorithm file")
    p.add_argument("name", help="formulation name (see `workbench formulations`) or module:Attribute")
    add_topology_arguments(p, required=True)
    p.add_argument("--collective", help="allgather, reducescatter, allreduce, broadcast, reduce, gather, scatter, "
                                         "alltoall")
    p.add_argument("--size", required=True, help="nccl-tests size, e.g. 1GiB")
    p.add_argument("--chunks", type=int, default=1, help="chunks per rank (default 1)")
    p.add_argument("--root", type=int, help="root rank of rooted collectives (default 0)")
    p.add_argument("--demand", help="custom collective: YAML/JSON with 'matrix' (chunks s->d) or 'pre'/'post'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", default="60s", help="hard limit for the run (default 60s)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="formulation parameter (repeatable)")
    p.add_argument("-o", "--output", required=True, help="algorithm file to write (.json)")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("run", help="run an experiment config (resumable)")
    p.add_argument("config", help="experiment YAML, e.g. experiments/tacos_table5.yaml")
    p.add_argument("--jobs", type=int, default=1, help="cells in parallel on this machine (default 1)")
    p.add_argument("--scheduler", help="address of a Dask scheduler, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--quick", action="store_true", help="the config's reduced grid (its 'quick' section)")
    p.add_argument("--fresh", action="store_true",
                   help="compute into a folder under results/runs/ and compare with the committed reference; "
                        "the same command resumes the newest unfinished one with this config")
    p.add_argument("--new", action="store_true", help="with --fresh: always start a new folder")
    p.add_argument("--out", help="run folder (default results/<name>/, resumed if it exists)")
    p.add_argument("--results-dir", default="results", help="where run folders live (default results/)")
    p.add_argument("--retry-errors", action="store_true", help="run cells whose row says 'error' again")
    p.add_argument("--no-figures", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="write table.md, table.csv and figures for a run folder")
    p.add_argument("folder")
    p.add_argument("--no-figures", action="store_true")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("rebound", help="recompute a finished run's bounds (no synthesis) and rewrite its report")
    p.add_argument("folder")
    p.set_defaults(func=_cmd_rebound)

    p = sub.add_parser("export", help="lower an algorithm file to MSCCL XML or an MSCCL++ execution plan "
                                      "(and run it through the interpreter)")
    p.add_argument("file")
    p.add_argument("--format", default="msccl-xml", help="msccl-xml (default) or mscclpp")
    p.add_argument("--proto", default="Simple", choices=["Simple", "LL", "LL128"])
    p.add_argument("--gpus-per-node", type=int,
                   help="mscclpp: GPUs per node (memory channels inside a node, port channels between); "
                        "default: one node")
    p.add_argument("--instances", type=int, default=1, help="split each chunk in N, one channel per instance")
    p.add_argument("--max-bytes", help="the size range's upper end for the executor (default 0 = unbounded)")
    p.add_argument("--no-fuse", action="store_true",
                   help="keep receives and forwarding sends as separate steps (import then reproduces the timing)")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("interpret", help="check an MSCCL XML or MSCCL++ plan for races, run it as the runtime "
                                         "would and check the collective")
    p.add_argument("file")
    p.add_argument("--root", type=int, help="root of a rooted collective (default 0)")
    p.add_argument("--schedules", type=int, default=0,
                   help="also run this many random interleavings of the threadblocks (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first random schedule (default 0)")
    p.set_defaults(func=cmd_interpret)

    p = sub.add_parser("import", help="turn an MSCCL XML into a workbench.algorithm/1 file")
    p.add_argument("file")
    add_topology_arguments(p, required=True)
    p.add_argument("--size", required=True, help="nccl-tests size, e.g. 1GiB")
    p.add_argument("--root", type=int)
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=cmd_import)

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

    p = sub.add_parser("formulations", help="list the registered formulations, or one's parameters")
    p.add_argument("name", nargs="?", help="show this formulation's parameters")
    p.set_defaults(func=_cmd_formulations)
    for command in sub.choices.values():
        command.add_argument("--max-memory", metavar="SIZE",
                             help="memory budget of the size guard (default 80%% of the machine's), e.g. 40GB")
    return parser


def _cmd_formulations(args: argparse.Namespace) -> int:
    from workbench.parameters import describe_parameters
    from workbench.registry import FormulationError, available_formulations, get_formulation, resolve_formulation

    if args.name:
        try:
            formulation = resolve_formulation(args.name)
        except FormulationError as exc:
            raise UsageError(str(exc)) from None
        doc = (getattr(type(formulation), "__doc__", None) or "").strip().splitlines()
        print(f"{args.name} ({formulation.kind})" + (f": {doc[0]}" if doc else ""))
        print("parameters (--set KEY=VALUE, or params: in an experiment):")
        for line in describe_parameters(formulation):
            print(line)
        return 0
    for name in available_formulations():
        print(f"{name:<16} {get_formulation(name).kind}")
    return 0


def _input_errors() -> tuple[type[BaseException], ...]:
    from workbench.experiment import ConfigError
    from workbench.registry import FormulationError
    from workbench.report import ReportError
    from workbench.size_guard import SizeError

    return (UsageError, TopologyError, CollectiveError, AlgorithmFormatError, UnitError, ConfigError,
            FormulationError, ReportError, SizeError)


def _apply_max_memory(text: str | None) -> None:
    """``--max-memory``: this process's size-guard budget, inherited by the cells it starts."""
    from workbench import size_guard

    if text is None:
        size_guard.set_budget(None)
        return
    try:
        value = parse_size(text)
    except UnitError as exc:
        raise UsageError(f"--max-memory: {exc}") from None
    if not value > 0:
        raise UsageError(f"--max-memory: must be positive, got {text!r}")
    size_guard.set_budget(value)
    os.environ[size_guard.BUDGET_ENV] = repr(value)


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM (a batch scheduler, `kill`) takes the same path as Ctrl-C


def main(argv: Sequence[str] | None = None) -> int:
    import signal
    import threading

    from workbench.size_guard import BUDGET_ENV

    MAIN_ENTERED[0] = time.time()
    parser = _build_parser()
    args = None
    previous = None
    inherited_budget = os.environ.get(BUDGET_ENV)  # --max-memory sets it for this call's cells only
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        _apply_max_memory(getattr(args, "max_memory", None))
        return int(args.func(args) or 0)
    except _input_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except IsADirectoryError as exc:
        print(f"error: {exc.filename}: is a folder, not a file", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a binary file where text (JSON, YAML, XML) was expected
        named = next((str(getattr(args, k)) for k in ("file", "config", "demand", "topology")
                      if isinstance(getattr(args, k, None), str) and os.path.isfile(getattr(args, k))), "the input")
        print(f"error: {named}: not a text file (byte {exc.start} is not {exc.encoding})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`workbench formulations | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's flush at exit too
        return 0
    except MemoryError:
        print("error: out of memory (lower the problem size or raise --max-memory only if the machine has it)",
              file=sys.stderr)
        return 5
    except Exception as exc:  # the one catch-all at the boundary: one line, not a traceback
        if getattr(args, "debug", False):
            raise
        first = (str(exc).splitlines() or [""])[0]
        print(f"error: {type(exc).__name__}: {first} (re-run with --debug for the traceback)", file=sys.stderr)
        return 5
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if inherited_budget is None:
            os.environ.pop(BUDGET_ENV, None)
        else:
            os.environ[BUDGET_ENV] = inherited_budget


if __name__ == "__main__":
    sys.exit(main())
