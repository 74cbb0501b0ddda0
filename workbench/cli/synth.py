"""``workbench synth``: one problem, one formulation, in a child process under a hard limit.

The limit counts from the command's start, so start-up and the pre-checks (building the
topology, reachability, the size guard) use it up; the formulation gets what is left. Parameters
(``--set``) are checked against the formulation's declarations before anything runs, the
collective's size is guarded before it is built, and the work the parameters ask for on this problem
is priced before the cell starts (``--set chunks=1000000000``: one line, exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from workbench.cli.common import UsageError, add_topology_arguments, at_least_two, topology_from_args
from workbench.util.units import UnitError, format_time, parse_size, parse_time

__all__ = ["cmd_synth"]



def _claim_note(fields: dict) -> str:
    """``, X claimed (in model M[, simulated there: Y])``: the formulation's estimate beside the
    simulated time, the model it is in, and that model's simulation where it is another."""
    claimed = fields.get("claimed_time")
    if claimed is None:
        return ""
    model, there = fields.get("claim_model"), fields.get("claim_simulated")
    note = f", {format_time(claimed)} claimed"
    if model:
        note += f" in {model}"
        if there is not None and there != fields.get("collective_time"):
            note += f" (simulated there: {format_time(there)})"
    return note

def _efficiency_line(fields: dict) -> str:
    """The efficiency line: the fraction of the bound the schedule reaches, or why there is none (a
    bound above the simulated time is a bug in the bounds: the row's efficiency is None)."""
    from workbench.bounds.yardstick import bound_above

    bound, efficiency = fields.get("bound"), fields.get("efficiency")
    if bound is None:
        return "efficiency        - (no bound was computed)"
    if bound_above(bound, fields.get("default_collective_time"), fields.get("collective_time")):
        return (f"efficiency        - (the best lower bound {format_time(bound)} is above the simulated time: "
                f"a bounds bug; not used to call this schedule optimal)")
    if not isinstance(efficiency, (int, float)) or efficiency != efficiency:  # None, or a NaN (no positive time)
        return f"efficiency        - (bound {format_time(bound)})"
    what = "the optimum (this schedule meets the bound)" if fields.get("bound_exact") else "the best lower bound"
    return f"efficiency        {efficiency:.1%} of {what} ({format_time(bound)})"


def _parse_set(values: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` pairs; each value is YAML (text that is not YAML is the string as
    written), read with the refusals of ``workbench.util.safe_load`` (duplicate keys, alias bombs, deep
    nesting, overlong integers: one line naming the key)."""
    if not values:
        return {}
    from workbench.util.safe_load import parse_yaml

    params: dict[str, Any] = {}
    for item in values or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected key=value")
        params[key.strip()] = (parse_yaml(raw, f"--set {key.strip()}", UsageError, raw_on_syntax_error=True)
                               if raw.strip() else "")
    return params


def _load_demand(path: str, num_npus: int) -> dict[str, Any]:
    """A custom collective from a demand file (YAML or JSON): explicit pre/post, or a matrix of
    chunks s -> d. Fields are read by type: ``combining: "no"`` is refused, not read as true."""
    from workbench.model.collective import custom_collective
    from workbench.util.safe_load import boolean, load_file, number

    data = load_file(path, "file", UsageError, syntax="yaml")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping with 'matrix' or 'pre' and 'post'")
    ranks = number(data.get("ranks", num_npus), f"{path}: ranks", UsageError, minimum=1, integer=True)
    if "matrix" in data:
        matrix = data["matrix"]
        if not (isinstance(matrix, list) and len(matrix) == ranks and all(isinstance(r, list) and len(r) == ranks
                                                                           for r in matrix)):
            raise UsageError(f"{path}: matrix: expected {ranks} rows of {ranks} chunk counts")
        pre, post = [], []
        for src, row in enumerate(matrix):
            for dst, count in enumerate(row):
                if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    raise UsageError(f"{path}: matrix[{src}][{dst}]: expected a chunk count >= 0, got {count!r}")
        _guard_demand(path, matrix)  # every count becomes that many chunks: sized before they are listed
        for src, row in enumerate(matrix):
            for dst, count in enumerate(row):
                if src != dst:
                    pre += [[src]] * count
                    post += [[dst]] * count
        combining = False
    else:
        for key in ("pre", "post"):
            if key not in data:
                raise UsageError(f"{path}: missing field {key!r} (or give 'matrix')")
        from workbench.model.collective import pairs_to_lists

        pre = pairs_to_lists(data["pre"], "pre", path)
        post = pairs_to_lists(data["post"], "post", path)
        combining = boolean(data.get("combining", False), f"{path}: combining", UsageError)
    custom_collective(ranks, pre, post, combining, path)  # validates
    return {"kind": "custom", "ranks": ranks, "pre": pre, "post": post, "combining": combining}


def _guard_demand(path: str, matrix: list[list[int]]) -> None:
    """``SizeError`` (exit 2) when the chunks a demand matrix asks for could not fit, naming the
    largest entry and the total."""
    from workbench.util import size_guard

    entries = [(count, src, dst) for src, row in enumerate(matrix) for dst, count in enumerate(row) if src != dst]
    if not entries:
        return
    total = sum(count for count, _, _ in entries)
    count, src, dst = max(entries)
    size_guard.check_declared(f"--demand {path}", [(f"matrix[{src}][{dst}]={count} ({total:,} chunks in all)",
                                                   size_guard.demand_bytes(total))])


_SYNTH_EXIT = {"optimal": 0, "feasible": 0, "infeasible": 3, "timeout": 4, "error": 5}




def _command_start(entered: float) -> float:
    """When this command started: the process start when ``main`` runs as the program (start-up and
    pre-checks then count against ``--time-limit``), else ``entered``, when ``main`` was called
    (embedded, tests)."""
    started = _process_start(entered)
    return started if entered - started < 10.0 else entered


def _process_start(entered: float) -> float:
    """When this process started (epoch seconds), from /proc; ``entered`` where /proc is not there."""
    try:
        with open("/proc/self/stat") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])  # field 22, after the command name
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime"))
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
        return min(started, entered)
    except (OSError, ValueError, IndexError, StopIteration):
        return entered


def _guard_transfers(args: argparse.Namespace, topology: Any) -> None:
    """Refuse a collective whose schedule could not fit (e.g. ``--chunks 100000000``) before building it."""
    from workbench.util import size_guard

    kind = (args.collective or "alltoall").lower().replace("-", "").replace("_", "")
    needed = size_guard.schedule_bytes(topology.num_npus, topology.num_nodes, len(topology.links), [kind], args.chunks)
    try:
        size_guard.check(f"--chunks {args.chunks} on {args.topology}", needed)
    except size_guard.SizeError as exc:
        raise UsageError(str(exc)) from None


def _price_parameters(formulation: Any, params: dict[str, Any], topology: Any, collective: dict[str, Any],
                      chunks: int, size: float) -> None:
    """``SizeError`` (exit 2) when a ``--set`` value asks for more work than the budget holds on this
    problem (``workbench.plugin.parameters.price_parameters``), before the cell starts."""
    from workbench.plugin.parameters import price_parameters
    from workbench.util.size_guard import ProblemSize

    custom = collective["kind"] == "custom"
    problem = ProblemSize(topology.num_npus, topology.num_nodes, len(topology.links), collective["kind"],
                          1 if custom else chunks, float(len(collective["pre"])) if custom else 0.0, size)
    price_parameters(formulation, params, "--set", [problem], sep=" ")


def _check_outputs(output: str) -> None:
    """The algorithm file and the frontier files beside it (``FILE.1.json``, ... of a Pareto
    search) that exist already: each must be able to take a file, checked before any work."""
    import glob
    import re

    from workbench.util.files import check_output_file

    path = check_output_file(output, (".json",), "algorithm file")
    if path.is_char_device():
        return  # one document goes through the device; no frontier files are made beside it
    frontier = re.compile(re.escape(path.stem) + r"\.\d+" + re.escape(path.suffix))
    try:
        siblings = list(path.parent.glob(f"{glob.escape(path.stem)}.*{glob.escape(path.suffix)}"))
    except OSError:  # an unlistable folder: the writer still refuses a non-regular file there
        siblings = []
    for sibling in siblings:
        if frontier.fullmatch(sibling.name):
            check_output_file(sibling)


def _solver_note(fields: dict[str, Any]) -> str:
    """What the formulation itself said, where it differs from the row's status (``workbench.bounds.yardstick``):
    its own status, and the model it proved optimality in."""
    solver, model = fields.get("solver_status"), fields.get("model_optimal")
    if model:
        return f" (optimal in the formulation's own model: {model})"
    return f" (the formulation reported {solver})" if solver and solver != fields.get("status") else ""


def cmd_synth(args: argparse.Namespace) -> int:
    """``workbench synth``: run one schedule formulation in a cell process and write its algorithm
    file; exit 0 optimal or feasible, 3 infeasible, 4 timeout, 5 error."""
    from workbench.run.monitor import prestart

    child = prestart()  # its interpreter and imports overlap the checks below
    try:
        return _synth(args, child)
    except BaseException:
        child.close()
        raise


def _checked_formulation(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The schedule formulation ``args.name`` names and its ``--set`` parameters, checked against
    what it declares."""
    from workbench.plugin.registry import FormulationError, resolve_formulation
    from workbench.plugin.parameters import ParameterError, check_parameters

    try:
        formulation = resolve_formulation(args.name)
    except FormulationError as exc:
        raise UsageError(str(exc)) from None
    if formulation.kind != "schedule":
        raise UsageError(f"{args.name} is a {formulation.kind} formulation; `workbench synth` needs a schedule one")
    params = _parse_set(args.set)
    try:
        check_parameters(formulation, params, "--set", sep=" ")
    except ParameterError as exc:
        raise UsageError(str(exc)) from None
    return formulation, params


def _size_and_limit(args: argparse.Namespace) -> tuple[float, float]:
    """``--size`` in bytes and ``--time-limit`` in seconds, both positive; ``--chunks`` at least 1."""
    try:
        size = parse_size(args.size)
        limit = parse_time(args.time_limit)
    except UnitError as exc:
        raise UsageError(str(exc)) from None
    if size <= 0 or limit <= 0:
        raise UsageError("--size and --time-limit must be positive")
    if args.chunks < 1:
        raise UsageError("--chunks must be at least 1")
    return size, limit


def _cell_collective(args: argparse.Namespace, topology: Any) -> Any:
    """The cell's collective: the ``--demand`` file's, or ``--collective`` checked on the topology."""
    from workbench.model.collective import make_collective

    if args.demand:
        return _load_demand(args.demand, topology.num_npus)
    if not args.collective:
        raise UsageError("give --collective KIND (or --demand FILE)")
    at_least_two(topology.num_npus, args.topology)
    probe = make_collective(args.collective, topology.num_npus, args.chunks, args.root)
    probe.check_reachable(topology)
    return {"kind": probe.kind, "root": probe.root}


def _synth(args: argparse.Namespace, child: Any) -> int:
    from pathlib import Path

    from workbench.run.monitor import execute
    from workbench.run.evaluate import solver_time_limit
    from workbench.config.evaluation import Evaluation
    from workbench.config.experiment import Cell
    from workbench.run.request import CellRequest

    _check_outputs(args.output)  # before anything is built or synthesized
    formulation, params = _checked_formulation(args)
    topology = topology_from_args(args.topology, args.alpha, args.bandwidth, args.overhead)
    size, limit = _size_and_limit(args)
    _guard_transfers(args, topology)
    collective = _cell_collective(args, topology)
    _price_parameters(formulation, params, topology, collective, args.chunks, size)
    output = Path(args.output)
    cell = Cell(experiment="synth", topology={"label": topology.name}, collective=collective, size_bytes=size,
                chunks=args.chunks, formulation={"name": args.name, "label": args.name, "params": params},
                seed=args.seed, time_limit=limit, evaluation=Evaluation(save_algorithms=True))
    # the topology goes to the cell as built here (with its builder facts, e.g. a grid's dimensions)
    # a started (not forked) cell loads an import path's module from the folder this resolved it in;
    # the output is made absolute without resolving links: a link named -o is replaced, not followed
    request = CellRequest("schedule", cell, topology=topology, algorithm_path=str(Path.cwd() / output),
                          deadline=_command_start(args.entered) + limit, formulation_dir=str(Path.cwd()))
    print(f"synthesizing with {args.name} (time limit {limit:g} s, solver limit {solver_time_limit(limit):g} s) ...",
          file=sys.stderr)
    fields = execute(request, child=child) or {}
    if fields.get("output_error"):  # the path passed the check but the write failed (a full disk or device)
        from workbench.util.files import OutputError

        raise OutputError(fields["output_error"])
    return _report(fields, args.name, limit)


def _report(fields: dict[str, Any], name: str, limit: float) -> int:
    """The run's summary on stdout, why it failed on stderr; the exit code of its status."""
    status = fields.get("status", "error")
    synth = fields.get("synthesis_seconds")
    print(f"status            {status}" + _solver_note(fields))
    if synth is not None:
        print(f"synthesis time    {synth:.3f} s")
    if fields.get("collective_time") is not None:
        print(f"collective time   {format_time(fields['collective_time'])} (simulated)" + _claim_note(fields))
        print(f"algbw / busbw     {fields['algbw']:.4g} / {fields['busbw']:.4g} GB/s")
        print(_efficiency_line(fields))
    for path in fields.get("algorithm_files", []):
        print(f"wrote             {path}")
    message = fields.get("message")
    if status == "infeasible":
        print(f"infeasible: {name} proved that no algorithm exists for this problem"
              + (f" ({message})" if message else ""), file=sys.stderr)
    elif status == "timeout":
        found = "its best algorithm was written" if fields.get("algorithm_files") else "no algorithm was found"
        print(f"timed out after {limit:g} s; {found}" + (f" ({message})" if message else ""), file=sys.stderr)
    elif status == "error":
        print(f"error: {message}", file=sys.stderr)
    return _SYNTH_EXIT.get(status, 5)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``synth`` to the ``workbench`` parser."""
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
