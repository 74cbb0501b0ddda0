"""``workbench export`` / ``interpret`` / ``import``: MSCCL XML and MSCCL++ execution plans."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.common import UsageError, add_topology_arguments, topology_from_args
from workbench.util.units import UnitError, parse_size

__all__ = ["cmd_export", "cmd_interpret", "cmd_import"]


def cmd_export(args: argparse.Namespace) -> int:
    """``workbench export``: write a verified algorithm file as MSCCL XML or an MSCCL++ plan, written
    only once the interpreter ran it without a race; exit 1 for an invalid algorithm."""
    from pathlib import Path

    from workbench.msccl import MscclError, export_xml, interpret
    from workbench.util.files import check_output_file, write_output

    if args.format not in ("msccl-xml", "mscclpp"):
        raise UsageError(f"--format: msccl-xml or mscclpp, got {args.format!r}")
    if args.format == "mscclpp":
        check_output_file(args.output, (".json",), "MSCCL++ plan")
    else:
        check_output_file(args.output, (".xml",), "MSCCL XML file")
        if args.in_place:
            raise UsageError("--in-place applies to mscclpp plans; an MSCCL XML is written for both aliasings "
                             '(inplace="1" outofplace="1")')
    from workbench.model.algorithm import load_algorithm
    from workbench.checking.verify import InvalidAlgorithm, verify

    algorithm = load_algorithm(args.file)
    if args.format == "mscclpp":  # a plan writes a period out in full: priced before it is verified or expanded
        from workbench.mscclpp.export import check_expansion

        check_expansion(algorithm, args.file)

    try:
        verify(algorithm)  # a runtime file is written only for a correct algorithm
    except InvalidAlgorithm as exc:
        print(f"INVALID {args.file}: {exc}", file=sys.stderr)
        return 1
    if args.format == "mscclpp":
        return _export_mscclpp(args, algorithm)
    try:
        max_bytes = parse_size(args.max_bytes) if args.max_bytes else None
    except UnitError as exc:
        raise UsageError(f"--max-bytes: {exc}") from None
    try:
        text = export_xml(algorithm, proto=args.proto, instances=args.instances, max_bytes=max_bytes,
                          fuse=not args.no_fuse)
        report = interpret(text, args.output, root=algorithm.collective.root)
    except MscclError as exc:
        raise UsageError(f"cannot export {args.file}: {exc}") from None
    write_output(Path(args.output), text)
    print(f"wrote {args.output}: {report['ranks']} ranks, {report['transfers']} sends; the interpreter found no race "
          f"and every postcondition holds, {' and '.join(report['aliasings'])}")
    return 0


def _export_mscclpp(args: argparse.Namespace, algorithm) -> int:
    from pathlib import Path

    from workbench.util import fastjson
    from workbench.util.files import write_output
    from workbench.msccl import MscclError
    from workbench.mscclpp import export_plan, interpret_plan

    if args.instances != 1 or args.max_bytes or args.no_fuse:
        raise UsageError("--instances, --max-bytes and --no-fuse apply to msccl-xml, not to mscclpp plans")
    in_place = args.in_place
    # one-sided puts of other GPUs into the one buffer would need a signal that the piece there has left
    both = algorithm.collective.kind != "alltoall"
    if in_place and not both:
        raise UsageError("--in-place: an MSCCL++ All-to-All plan is written for out-of-place calls only")
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be at least 1, got {args.gpus_per_node}")
    try:
        plan = export_plan(algorithm, gpus_per_node=args.gpus_per_node,
                           protocol="Simple" if args.proto == "Simple" else args.proto, source=args.file,
                           in_place=in_place)
        text = fastjson.text(plan, indent=1) + "\n"
        report = interpret_plan(text, args.output, root=algorithm.collective.root,
                                aliasings=[False, True] if both else [False])
    except MscclError as exc:
        raise UsageError(f"cannot export {args.file}: {exc}") from None
    write_output(Path(args.output), text)
    nodes = "one node" if args.gpus_per_node is None else f"{args.gpus_per_node} GPUs per node"
    print(f"wrote {args.output}: MSCCL++ execution plan, {report['ranks']} ranks ({nodes}), {report['transfers']} "
          f"puts ({'in' if in_place else 'out-of'}-place field); the interpreter found no race and every "
          f"postcondition holds, {' and '.join(report['aliasings'])}")
    return 0


def cmd_interpret(args: argparse.Namespace) -> int:
    """Exit 2 for a file that is not a runtime file (unreadable, not well-formed, wrong root, a
    field of the wrong type: ``MscclFormatError``), 1 for one that is but fails when run."""
    from workbench.msccl import MscclError, interpret
    from workbench.msccl.common import MscclFormatError
    from workbench.util.safe_load import read_input

    text = read_input(args.file, "MSCCL XML or MSCCL++ plan", UsageError)  # a FIFO or folder: refused unopened
    if args.schedules < 0:
        raise UsageError(f"--schedules must be 0 or more, got {args.schedules}")
    run = interpret
    if text.lstrip().startswith("{"):  # an MSCCL++ execution plan (JSON)
        from workbench.mscclpp import interpret_plan as run
    try:
        report = run(text, args.file, root=args.root, schedules=args.schedules, seed=args.seed)
    except MscclFormatError as exc:
        raise UsageError(str(exc)) from None
    except MscclError as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    extra = f", and in {args.schedules} random schedules" if args.schedules else ""
    print(f"ok: {report['collective']} on {report['ranks']} ranks, {report['transfers']} sends, no races, "
          f"postconditions hold{extra}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``workbench import``: read MSCCL XML as an algorithm on ``--topology`` for ``--size`` and save it
    as an algorithm file (.json)."""
    from workbench.util.files import check_output_file
    from workbench.msccl import MscclError, import_xml

    check_output_file(args.output, (".json",), "algorithm file")
    topology = topology_from_args(args.topology, args.alpha, args.bandwidth, args.overhead)
    try:
        size = parse_size(args.size)
    except UnitError as exc:
        raise UsageError(f"--size: {exc}") from None
    from workbench.util.safe_load import read_input

    text = read_input(args.file, "MSCCL XML file", UsageError)
    try:
        algorithm = import_xml(text, topology, size, args.file, root=args.root)
    except MscclError as exc:
        raise UsageError(f"cannot import: {exc}") from None
    algorithm.save(args.output)
    print(f"wrote {args.output}: {len(algorithm.transfers)} transfers ({algorithm.collective.describe()})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``export``, ``interpret`` and ``import`` to the ``workbench`` parser."""
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
    p.add_argument("--in-place", action="store_true",
                   help="mscclpp: mark the plan for in-place calls (it is valid for both; the executor "
                        "matches calls by this field)")
    p.add_argument("-o", "--output", required=True, help="file to write: .xml (msccl-xml) or .json (mscclpp)")
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
    p.add_argument("-o", "--output", required=True, help="algorithm file to write (.json)")
    p.set_defaults(func=cmd_import)
