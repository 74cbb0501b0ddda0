"""``workbench export`` / ``interpret`` / ``import``: MSCCL XML and MSCCL++ execution plans."""

from __future__ import annotations

import argparse
import sys

from workbench.algorithm import load_algorithm
from workbench.cli_common import UsageError, topology_from_args
from workbench.units import UnitError, parse_size

__all__ = ["cmd_export", "cmd_interpret", "cmd_import"]


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.msccl import MscclError, export_xml, interpret
    from workbench.files import write_atomic

    if args.format not in ("msccl-xml", "mscclpp"):
        raise UsageError(f"--format: msccl-xml or mscclpp, got {args.format!r}")
    algorithm = load_algorithm(args.file)
    from workbench.verify import InvalidAlgorithm, verify

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
    write_atomic(Path(args.output), text)
    print(f"wrote {args.output}: {report['ranks']} ranks, {report['transfers']} sends; the interpreter found no race "
          f"and every postcondition holds")
    return 0


def _export_mscclpp(args: argparse.Namespace, algorithm) -> int:
    import json
    from pathlib import Path

    from workbench.files import write_atomic
    from workbench.msccl import MscclError
    from workbench.mscclpp import export_plan, interpret_plan

    if args.instances != 1 or args.max_bytes or args.no_fuse:
        raise UsageError("--instances, --max-bytes and --no-fuse apply to msccl-xml, not to mscclpp plans")
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be at least 1, got {args.gpus_per_node}")
    try:
        plan = export_plan(algorithm, gpus_per_node=args.gpus_per_node,
                           protocol="Simple" if args.proto == "Simple" else args.proto)
        text = json.dumps(plan, indent=1) + "\n"
        report = interpret_plan(text, args.output, root=algorithm.collective.root)
    except MscclError as exc:
        raise UsageError(f"cannot export {args.file}: {exc}") from None
    write_atomic(Path(args.output), text)
    nodes = "one node" if args.gpus_per_node is None else f"{args.gpus_per_node} GPUs per node"
    print(f"wrote {args.output}: MSCCL++ execution plan, {report['ranks']} ranks ({nodes}), {report['transfers']} "
          f"puts; the interpreter found no race and every postcondition holds")
    return 0


def cmd_interpret(args: argparse.Namespace) -> int:
    from workbench.msccl import MscclError, interpret

    try:
        text = open(args.file).read()
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read ({exc.strerror})") from None
    if args.schedules < 0:
        raise UsageError(f"--schedules must be 0 or more, got {args.schedules}")
    run = interpret
    if text.lstrip().startswith("{"):  # an MSCCL++ execution plan (JSON)
        from workbench.mscclpp import interpret_plan as run
    try:
        report = run(text, args.file, root=args.root, schedules=args.schedules, seed=args.seed)
    except MscclError as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    extra = f", and in {args.schedules} random schedules" if args.schedules else ""
    print(f"ok: {report['collective']} on {report['ranks']} ranks, {report['transfers']} sends, no races, "
          f"postconditions hold{extra}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from workbench.msccl import MscclError, import_xml

    topology = topology_from_args(args.topology, args.alpha, args.bandwidth)
    try:
        size = parse_size(args.size)
        text = open(args.file).read()
    except UnitError as exc:
        raise UsageError(f"--size: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read ({exc.strerror})") from None
    try:
        algorithm = import_xml(text, topology, size, args.file, root=args.root)
    except MscclError as exc:
        raise UsageError(f"cannot import: {exc}") from None
    algorithm.save(args.output)
    print(f"wrote {args.output}: {len(algorithm.transfers)} transfers ({algorithm.collective.describe()})")
    return 0
