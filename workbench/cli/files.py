"""``workbench topology`` / ``builders`` / ``verify`` / ``simulate`` / ``bounds`` / ``formulations``:
looking at a topology, an algorithm file or a problem, without synthesising anything."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from workbench.cli.common import (UsageError, add_overhead_argument, add_topology_arguments, at_least_two,
                                  topology_from_args, uniform_overhead)
from workbench.util import fastjson
from workbench.util.units import UnitError, format_time, parse_size

if TYPE_CHECKING:  # the parser is built on every command: the model loads only when a command runs
    from workbench.model.algorithm import Algorithm

__all__ = ["register", "register_formulations"]

_TOPOLOGY_EXTENSIONS = (".yaml", ".yml", ".json")  # what `topology -o` writes (and topology files are read as)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the ``workbench`` parser."""
    p = sub.add_parser("topology", help="describe a topology (builder spec or file)")
    p.add_argument("spec", help="builder spec (see `workbench builders`) or a .yaml/.json file")
    p.add_argument("--alpha")
    p.add_argument("--bandwidth")
    add_overhead_argument(p)
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
    p.add_argument("--model", help="the three options as one string, link/order/switch (e.g. "
                                   "blocking/in-order/cut-through), or 'claim': the model the file's claimed time is in")
    p.add_argument("--json", action="store_true", help="print a JSON object (times in s, bandwidths in GB/s)")
    p.add_argument("--links", action="store_true", help="with --json: per-link busy time and bytes")
    p.add_argument("--per-transfer", action="store_true", help="with --json: per-transfer start and end")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("bounds", help="lower bounds and TACOS's ideal for a problem")
    add_topology_arguments(p, required=True)
    p.add_argument("--collective", required=True)
    p.add_argument("--size", required=True, help="nccl-tests size, e.g. 1GiB")
    p.add_argument("--chunks", type=int, default=1, help="chunks per rank (the bounds do not depend on it)")
    p.add_argument("--ranks", type=int, help="ranks (default: every NPU)")
    p.add_argument("--root", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_bounds)


def register_formulations(sub: argparse._SubParsersAction) -> None:
    """Add ``formulations`` (list them, or one's parameters) to the ``workbench`` parser."""
    p = sub.add_parser("formulations", help="list the registered formulations, or one's parameters")
    p.add_argument("name", nargs="?", help="show this formulation's parameters")
    p.set_defaults(func=_cmd_formulations)


def _load(path: str, args: argparse.Namespace) -> Algorithm:
    from workbench.model.algorithm import load_algorithm

    algorithm = load_algorithm(path)  # sized by its length before it is read
    if getattr(args, "topology", None):
        physical = topology_from_args(args.topology, args.alpha, args.bandwidth, args.overhead)
        if physical.num_npus != algorithm.topology.num_npus:
            raise UsageError(f"--topology has {physical.num_npus} NPUs but {path} was made for "
                             f"{algorithm.topology.num_npus}")
        algorithm.topology = physical
    else:  # the file's own topology: one --overhead value prices every message on it
        algorithm.topology = uniform_overhead(algorithm.topology, getattr(args, "overhead", None))
    return algorithm


# ------------------------------------------------------------------ commands
def _cmd_topology(args: argparse.Namespace) -> int:
    if args.output and not args.json:  # --json prints instead
        from workbench.util.files import check_output_file

        check_output_file(args.output, _TOPOLOGY_EXTENSIONS, "topology file")
    topology = topology_from_args(args.spec, args.alpha, args.bandwidth, args.overhead)
    if args.json:
        print(fastjson.text(topology.to_dict(), indent=1))
    elif args.output:
        topology.save(args.output)
        print(f"wrote {args.output}")
    else:
        print(topology.describe())
    return 0


def _cmd_builders(args: argparse.Namespace) -> int:
    from workbench.topology.builders import BUILDERS

    width = max(map(len, BUILDERS))
    for spec, text in BUILDERS.items():
        print(f"{spec:<{width}}  {text}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from workbench.checking.verify import InvalidAlgorithm, verify

    algorithm = _load(args.file, args)
    try:
        report = verify(algorithm)
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr if not args.json else sys.stdout)
        if args.json:
            print(fastjson.text({"valid": False, "reason": str(exc), "transfer": exc.transfer, "chunk": exc.chunk,
                                "ranks": list(exc.ranks), "kind": exc.kind}))
        return 1
    if args.json:
        print(fastjson.text(report.to_dict()))
    else:
        print(f"valid: {algorithm.collective.describe()}; {report.transfers} transfers, "
              f"{report.delivered_pairs} (chunk, rank) postconditions met")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from workbench.bounds import problem_bounds
    from workbench.checking.simulate import simulate
    from workbench.checking.verify import InvalidAlgorithm, verify

    algorithm = _load(args.file, args)
    try:
        default = verify(algorithm).simulation  # the default simulation comes with the verdict
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr)
        return 1
    options = dict(link_model=args.link_model, order=args.order, switch_model=args.switch_model)
    if args.model:
        options = _model_options(args.model, algorithm, args.file)
    result = default if options == default.options else simulate(algorithm, **options)
    # the problem's yardstick (not this file's chunking); this schedule meeting it proves it the optimum
    bounds = problem_bounds(algorithm.topology, algorithm.collective,
                            algorithm.collective.size_bytes(algorithm.chunk_bytes),
                            lp_time_limit=60.0, lp_max_variables=400_000)
    bounds.schedule_time = result.collective_time
    summary = result.summary()
    summary.update(bound=bounds.best, bound_exact=bounds.exact, efficiency=bounds.efficiency(result.collective_time),
                   rs_ag_throughput=bounds.rs_ag_throughput, ideal=bounds.ideal, claimed_time=algorithm.meta.get("claimed_time"))
    if args.json:
        data = result.to_dict(per_transfer=args.per_transfer) if args.per_transfer or args.links else summary
        data.update({k: summary[k] for k in ("bound", "bound_exact", "efficiency", "rs_ag_throughput", "ideal",
                                              "claimed_time")})
        print(fastjson.text(data))  # standard JSON: a NaN efficiency (a zero time) or an infinity is null
        return 0
    claimed = summary["claimed_time"]
    print(f"{algorithm.collective.describe()} on {algorithm.topology.name}")
    print(f"  collective time  {format_time(result.collective_time)}"
          + (f"   (claimed by the formulation: {format_time(claimed)}"
             f"{', in ' + str(algorithm.meta['claim_model']) if algorithm.meta.get('claim_model') else ''})"
             if claimed is not None else ""))
    print(f"  algbw            {summary['algbw']:.4g} GB/s")
    print(f"  busbw            {summary['busbw']:.4g} GB/s")
    what = "optimum" if bounds.exact else "best lower bound"
    efficiency = _efficiency_text(summary["efficiency"], bounds.above_schedule)
    print(f"  {what:<16} {format_time(bounds.best)}  ({efficiency})")
    print(f"  TACOS ideal      {format_time(bounds.ideal)}")
    print(f"  max link use     {summary['max_link_utilisation']:.1%}")
    print(f"  model            {options['link_model']}, {options['order']}, {options['switch_model']}")
    return 0


def _efficiency_text(efficiency: float | None, above: bool) -> str:
    """The bound's efficiency for ``simulate``'s text: a percentage, or why there is none."""
    if above:
        return "efficiency -: this bound is above the simulated time, which a lower bound never is: a bounds bug"
    if efficiency is None or efficiency != efficiency:  # a NaN: no positive simulated time to divide by
        return "efficiency -"
    return f"efficiency {efficiency:.1%}"


def _model_options(name: str, algorithm: Algorithm, path: str) -> dict[str, str]:
    """``simulate``'s options for ``--model``: a model name, or ``claim`` for the file's ``meta.claim_model``."""
    from workbench.checking.simulate import SimulationError, parse_model

    if name == "claim":
        name = algorithm.meta.get("claim_model")
        if not isinstance(name, str):
            raise UsageError(f"--model claim: {path} names no claim_model")
    try:
        options = parse_model(name)
    except SimulationError as exc:
        raise UsageError(f"--model: {exc}") from None
    if options is None:
        raise UsageError(f"--model {name}: a formulation's own model, which the simulator does not have")
    return options


def _guard_collective(args: argparse.Namespace, topology, ranks: int) -> None:
    """Refuse ``--chunks`` / ``--ranks`` whose collective and bounds could not fit (e.g. ``--chunks
    100000000``) before the collective is built, as ``synth`` does."""
    from workbench.util import size_guard

    kind = str(args.collective).lower().replace("-", "").replace("_", "")
    npus = max(ranks, topology.num_npus)
    needed = size_guard.schedule_bytes(npus, max(topology.num_nodes, npus), len(topology.links), [kind], args.chunks)
    size_guard.check(f"--chunks {args.chunks}" + (f" --ranks {args.ranks}" if args.ranks else "")
                     + f" on {args.topology}", needed)


def _cmd_bounds(args: argparse.Namespace) -> int:
    from workbench.bounds import problem_bounds
    from workbench.model.collective import make_collective

    topology = topology_from_args(args.topology, args.alpha, args.bandwidth, args.overhead)
    try:
        size = parse_size(args.size)
    except UnitError as exc:
        raise UsageError(f"--size: {exc}") from None
    if not size > 0:  # a bound is a time to move these bytes: nothing to move has none
        raise UsageError(f"--size: must be positive, got {args.size!r}")
    ranks = args.ranks or topology.num_npus
    at_least_two(ranks, args.topology)
    _guard_collective(args, topology, ranks)
    collective = make_collective(args.collective, ranks, args.chunks, args.root)
    collective.check_reachable(topology)
    bounds = problem_bounds(topology, collective, size, lp_time_limit=300.0)  # the same for any --chunks
    if args.json:
        print(fastjson.text(bounds.to_dict()))  # standard JSON: a NaN or infinity is null
        return 0
    explain = {"injection": "each rank's own links", "latency": "alpha path (any chunking)",
               "cut": "enumerated or sweep cuts", "flow_lp": "multi-commodity flow LP",
               "optimum": "exact max-flow optimum + cut alpha", "splitting_cut": "M / weakest NPU-splitting cut",
               "gossip": "2(N-1)M / NPUs' in-link bandwidth",
               "group_gossip": "2(g-1)M / bandwidth into g groups of NPUs",
               "two_hop": "raw inputs through each NPU's in-links, or two deliveries in a row",
               "egress": "each NPU's whole input leaves it, the last byte then reaches the farthest NPU",
               "alpha_beta": "time-expanded flow: alphas and bandwidth together",
               "rs_ag_throughput": "RS* + AG* throughput optima in sequence: not a bound",
               "ideal": "TACOS's Ideal metric, not a bound"}
    for key, value in bounds.to_dict().items():
        if key in ("exact", "label", "notes"):
            continue
        if key == "best":
            print(f"{'best':<16} {format_time(value)}  ({bounds.label})")
            continue
        shown = format_time(value) if value is not None else "-"
        print(f"{key:<16} {shown:<12} {explain.get(key, '')}")
    for key, note in bounds.notes.items():
        print(f"note: {key}: {note}")
    return 0


def _cmd_formulations(args: argparse.Namespace) -> int:
    from workbench.plugin.parameters import describe_parameters
    from workbench.plugin.registry import FormulationError, available_formulations, get_formulation, resolve_formulation

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
