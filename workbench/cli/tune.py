"""``workbench tune``: per-size bundles of runtime files (``workbench.run.tune`` describes the buckets,
the winner and the inclusive ranges).

Writes into ``-o DIR``: ``candidates/`` (every candidate's algorithm file, as ``workbench synth``
writes them), ``msccl/<collective>-<bucket>.xml`` and ``mscclpp/<collective>-<bucket>.json`` for each
bucket's winner (each run through the interpreter before it is written), ``summary.json`` and
``summary.md`` (bucket, range, winner, simulated time, bound, efficiency, ring's time and the
speed-up over it). One line per candidate goes to stderr as it finishes.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from workbench.cli.common import UsageError, add_topology_arguments, at_least_two, topology_from_args
from workbench.util import fastjson

__all__ = ["cmd_tune"]

_REFERENCE = "ring"


def _candidates(text: str | None) -> list[str]:
    from workbench.plugin.registry import FormulationError, resolve_formulation
    from workbench.run.tune import fast_formulations

    names = fast_formulations() if not text else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--formulations: no formulation named")
    for name in names:
        try:
            formulation = resolve_formulation(name)
        except FormulationError as exc:
            raise UsageError(f"--formulations: {exc}") from None
        if formulation.kind != "schedule":
            raise UsageError(f"--formulations: {name} is a {formulation.kind} formulation, not a schedule one")
    return names


def _run_candidate(topology, kind: str, bucket, name: str, limit: float, out: Path) -> dict[str, Any]:
    """One candidate at the bucket's size, in its own cell (``workbench.run``): its row fields."""
    from workbench.config.evaluation import Evaluation
    from workbench.config.experiment import Cell
    from workbench.run.monitor import execute
    from workbench.run.request import CellRequest

    root = 0 if kind in ("broadcast", "reduce", "gather", "scatter") else None
    cell = Cell(experiment="tune", topology={"label": topology.name}, collective={"kind": kind, "root": root},
                size_bytes=float(bucket.size), chunks=1, formulation={"name": name, "label": name, "params": {}},
                seed=0, time_limit=limit, evaluation=Evaluation(save_algorithms=True))
    path = out / "candidates" / f"{kind}-{bucket.index}-{name}.json"
    here = Path.cwd()  # absolute, links not resolved: a link in the bundle is replaced, never followed
    request = CellRequest("schedule", cell, topology=topology, algorithm_path=str(here / path),
                          run_folder=str(here / out))
    fields = execute(request) or {}
    fields["path"] = path if fields.get("algorithm_files") else None
    return fields


def _lower(path: Path, bucket, kind: str, out: Path) -> tuple[dict[Path, str], str | None]:
    """The winner's MSCCL XML and MSCCL++ plan for the bucket's range, each interpreted, by the
    file each goes to; ({file: text}, None) or ({}, why it does not lower)."""
    from workbench.model.algorithm import load_algorithm
    from workbench.msccl import MscclError, export_xml, interpret
    from workbench.mscclpp import export_plan, interpret_plan

    algorithm = load_algorithm(path)
    root = algorithm.collective.root
    try:
        xml = export_xml(algorithm, min_bytes=bucket.low, max_bytes=bucket.high)
        interpret(xml, f"{kind} bucket {bucket.index}", root=root)
        plan = export_plan(algorithm, min_message_size=bucket.low, max_message_size=bucket.high)
        text = fastjson.text(plan, indent=1) + "\n"
        interpret_plan(text, f"{kind} bucket {bucket.index}", root=root)
    except MscclError as exc:
        return {}, str(exc)
    return {out / "msccl" / f"{kind}-{bucket.index}.xml": xml, out / "mscclpp" / f"{kind}-{bucket.index}.json": text}, None


# What a bundle writes in each of its folders; a runtime loads every file of msccl/ (or mscclpp/),
# so anything else there would be loaded beside the bundle's own ranges.
_BUNDLE_NAMES = {"msccl": re.compile(r"[a-z]+-\d+\.xml"), "mscclpp": re.compile(r"[a-z]+-\d+\.json"),
                 "candidates": re.compile(r"[a-z]+-\d+-.+\.json")}


def _earlier_bundle(out: Path) -> list[Path]:
    """The files an earlier bundle left in ``out`` (removed once the new one is written, so a
    runtime never loads overlapping ranges of two bundles). ``UsageError``, before any work, when a
    bundle folder is a link or not a folder, or holds a file no bundle writes."""
    from workbench.run.folder_files import kind_of

    found = []
    for name, pattern in _BUNDLE_NAMES.items():
        folder = out / name
        kind = kind_of(folder)
        if kind is None:
            continue
        if kind != "a folder":
            raise UsageError(f"{folder}: is {kind}, not a folder (a bundle writes its files there; move it away)")
        for entry in sorted(folder.iterdir()):
            if not pattern.fullmatch(entry.name) or kind_of(entry) not in ("a regular file", "a symbolic link"):
                raise UsageError(f"{entry}: not a file of a tune bundle (a runtime would load it with the bundle's "
                                 f"own; move it away or name another -o folder)")
            found.append(entry)
    return found


def _write_bundle(lowered: dict[Path, str], earlier: list[Path], kept: set[str]) -> None:
    """Write the buckets' runtime files and remove the earlier bundle's files that are neither among
    them nor, in candidates/, named in ``kept`` (this run's candidate files)."""
    from workbench.util.files import write_output

    for file, content in lowered.items():
        file.parent.mkdir(parents=True, exist_ok=True)
        write_output(file, content)
    for stale in earlier:
        if stale not in lowered and not (stale.parent.name == "candidates" and stale.name in kept):
            stale.unlink(missing_ok=True)


def _markdown(rows: list[dict[str, Any]], title: str) -> str:
    from workbench.util.units import format_size, format_time

    def time(value):
        return format_time(value) if value else "-"

    lines = [f"# {title}", "", "| bucket | sizes | winner | time | bound | efficiency | ring | vs ring |",
             "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        efficiency = f"{r['efficiency']:.1%}" if r["efficiency"] else "-"
        vs_ring = f"{r['vs_ring']:.2f}x" if r["vs_ring"] else "-"
        sizes = (f"[{format_size(r['min_bytes'])}, {format_size(r['max_bytes'])}]" if i == len(rows) - 1 else
                 f"[{format_size(r['min_bytes'])}, {format_size(r['max_bytes'] + 1)})")
        lines.append(f"| {r['bucket']} | {sizes} "
                     f"| {r['winner'] or '-'} | {time(r['collective_time'])} | {time(r['bound'])} "
                     f"| {efficiency} | {time(r['ring_time'])} | {vs_ring} |")
    notes = [f"- bucket {r['bucket']}: {r['note']}" for r in rows if r["note"]]
    legend = ["", "Each bucket's files carry its ends as minBytes/maxBytes and min_message_size/max_message_size, "
                  "both inclusive: [a, b) above is a..b-1 bytes."]
    return "\n".join(lines + legend + ([""] + notes if notes else [])) + "\n"


def cmd_tune(args: argparse.Namespace) -> int:
    """``workbench tune``: per size bucket, time every candidate and write the fastest one that lowers
    as MSCCL XML and an MSCCL++ plan, with ``summary.json``/``.md``; exit 1 when a bucket has none."""
    from workbench.model.collective import make_collective
    from workbench.util.files import check_output_folder, write_output
    from workbench.run.tune import RangeError, buckets, parse_range, summary_row
    from workbench.util.units import UnitError, format_time, parse_time

    try:
        low, high = parse_range(args.sizes)
        ranges = buckets(low, high)
    except RangeError as exc:
        raise UsageError(f"--sizes {exc}") from None
    try:
        limit = parse_time(args.time_limit)
    except UnitError as exc:
        raise UsageError(f"--time-limit: {exc}") from None
    if limit <= 0:
        raise UsageError("--time-limit must be positive")
    names = _candidates(args.formulations)
    out = check_output_folder(args.output)
    earlier = _earlier_bundle(out)
    topology = topology_from_args(args.topology, args.alpha, args.bandwidth, args.overhead)
    at_least_two(topology.num_npus, args.topology)
    kind = args.collective
    make_collective(kind, topology.num_npus, 1, 0 if kind in ("broadcast", "reduce", "gather", "scatter") else None
                    ).check_reachable(topology)
    timed = list(dict.fromkeys([*names, _REFERENCE]))
    print(f"tuning {kind} on {topology.name}: {len(ranges)} bucket(s) x {len(timed)} formulation(s), "
          f"{limit:g} s each", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    rows, lowered, candidates = [], {}, []
    for bucket in ranges:
        results = {}
        for name in timed:
            fields = _run_candidate(topology, kind, bucket, name, limit, out)
            results[name] = fields
            candidates += [Path(f).name for f in fields.get("algorithm_files", [])]
            shown = format_time(fields["collective_time"]) if fields.get("collective_time") else fields.get(
                "status", "error")
            print(f"  bucket {bucket.index} {bucket.label(bucket is ranges[-1])} at {bucket.size:,} B: {name:<14} {shown}",
                  file=sys.stderr, flush=True)
        ranked = sorted((f["collective_time"], n) for n, f in results.items()
                        if n in names and f.get("collective_time") and f.get("path"))
        ring = results[_REFERENCE].get("collective_time")
        notes, files, winner = [], [], None
        for _, name in ranked:  # the fastest that lowers to the runtimes
            texts, why = _lower(results[name]["path"], bucket, kind, out)
            if texts:
                winner, files = name, [str(f.relative_to(out)) for f in texts]
                lowered.update(texts)
                break
            notes.append(f"{name} does not lower ({why})")
        if winner is None and not notes:
            notes.append("no candidate produced a schedule")
        rows.append(summary_row(bucket, winner, results.get(winner), ring, files, "; ".join(notes)))
    title = f"{kind} on {topology.name}, {args.sizes}"
    _write_bundle(lowered, earlier, kept=set(candidates))
    write_output(out / "summary.json", fastjson.text({"topology": topology.name, "collective": kind,
                                                      "sizes": [low, high], "time_limit": limit,
                                                      "formulations": names, "buckets": rows}, indent=1) + "\n")
    write_output(out / "summary.md", _markdown(rows, title))
    print(_markdown(rows, title), end="")
    missing = [r["bucket"] for r in rows if r["winner"] is None]
    if missing:
        print(f"no runtime file for bucket(s) {', '.join(map(str, missing))}: see {out / 'summary.md'}",
              file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``tune`` to the ``workbench`` parser."""
    p = sub.add_parser("tune", help="the fastest schedule per size bucket, as MSCCL XML and MSCCL++ plans")
    add_topology_arguments(p, required=True)
    p.add_argument("--collective", required=True,
                   choices=["allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter",
                            "alltoall"])
    p.add_argument("--sizes", required=True, help="size range LO..HI, one bucket per 4x (e.g. 64KB..256MB)")
    p.add_argument("--formulations", help="comma-separated candidates (default: every fast schedule formulation)")
    p.add_argument("--time-limit", default="60s", help="per candidate and bucket (default 60s)")
    p.add_argument("-o", "--output", required=True, help="bundle folder")
    p.set_defaults(func=cmd_tune)
