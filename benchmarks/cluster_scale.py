"""Clusters as they are built, at 128-1,024 GPUs: what each method answers and what a user waits for.

The fabrics are written by this module's own generator (not the builders): boxes of 8 GPUs on a
scale-up switch (450 GB/s, 0.25 us per link), one 50 GB/s NIC per GPU to its rail's leaf (1 us),
one leaf per rail per group of 32 boxes, and above 32 boxes 16 spines joined to every leaf
(0.5 us) with (32 x 50 GB/s) / (16 x R) per link, R = 1 (non-blocking) or 2 (2:1). Files carry no
dimensions. Every case runs one fresh ``workbench`` process (start-up, loading, synthesis,
verification, simulation and the bounds it prints) and records its wall time beside the result:

* ``bounds`` of a 1 GiB All-Gather on 1,024 GPUs (target: within 30 s);
* the All-to-All bound (1 GiB per rank) on 512 GPUs, non-blocking and 2:1 (targets: at least the
  boxes' NIC cut, 21.1 ms, and the leaf groups' spine cut, 21.5 ms);
* TACOS, hierarchical and ForestColl on a 1 GiB All-Gather, efficiency against the best bound
  (the exact throughput optimum T* plus its cut's alpha).

``python -m benchmarks.cluster_scale [--quick]`` (``--quick`` skips the runs over a minute);
results in ``results/bench/cluster_scale.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write

GB, US = 1e9, 1e-6
PER_LEAF, SPINES = 32, 16


def rail_fabric(boxes: int, over: float = 1.0, per_box: int = 8) -> dict:
    """The ``{nodes, links}`` document of a rail fabric (module docstring), with no ``meta``."""
    n = boxes * per_box
    links: list[dict] = []

    def both(u: int, v: int, alpha: float, bandwidth: float) -> None:
        links.append({"src": u, "dst": v, "alpha": alpha, "bandwidth": bandwidth})
        links.append({"src": v, "dst": u, "alpha": alpha, "bandwidth": bandwidth})

    node = n
    for b in range(boxes):
        for g in range(per_box):
            both(b * per_box + g, node, 0.25 * US, 450 * GB)
        node += 1
    groups = -(-boxes // PER_LEAF)
    leaf = {}
    for rail in range(per_box):
        for group in range(groups):
            leaf[rail, group] = node
            node += 1
    for b in range(boxes):
        for g in range(per_box):
            both(b * per_box + g, leaf[g, b // PER_LEAF], 1 * US, 50 * GB)
    if groups > 1:
        spines = range(node, node + SPINES)
        node += SPINES
        for switch in leaf.values():
            for spine in spines:
                both(switch, spine, 0.5 * US, min(PER_LEAF, boxes) * 50 * GB / SPINES / over)
    kinds = ["npu" if i < n else "switch" for i in range(node)]
    return {"name": f"railfile:{boxes}x{per_box}" + (f",{over:g}:1" if over != 1 else ""),
            "nodes": [{"id": i, "kind": k} for i, k in enumerate(kinds)], "links": links}


_PEAK: dict[str, float] = {}  # the last run's peak memory (GB), its children included


def _run(args: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        child = subprocess.Popen([sys.executable, "-m", "workbench", *args], stdout=out, stderr=subprocess.STDOUT,
                                 text=True)
        _, status, usage = os.wait4(child.pid, 0)  # its usage, the synthesis process it waited for included
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    _PEAK["last"] = usage.ru_maxrss / 1e6  # kB on Linux
    return wall, text if child.returncode == 0 else "error: " + " ".join(text.strip().splitlines()[-1:])


def bound_case(path: Path, collective: str) -> dict:
    wall, text = _run(["bounds", "--topology", str(path), "--collective", collective, "--size", "1GiB", "--json"])
    if text.startswith("error"):
        return {"wall": wall, "error": text}
    data = json.loads(text[text.index("{"):])
    return {"wall": wall, "best": data.get("best"), "note": data.get("notes", {}).get("cut", "")}


def synth_case(path: Path, method: str, time_limit: int, folder: Path, extra: tuple[str, ...] = ()) -> dict:
    out = folder / "out.json"
    wall, text = _run(["synth", method, "--topology", str(path), "--collective", "allgather", "--size", "1GiB",
                       "--time-limit", str(time_limit), "-o", str(out), *extra])
    if text.startswith("error"):
        return {"wall": wall, "error": text}
    found = re.search(r"efficiency\s+([\d.]+)% of the best lower bound \(([^)]*)\)", text)
    simulated = re.search(r"collective time\s+(\S+ \S+)", text)
    status = re.search(r"status\s+(\S+)", text)
    out.unlink(missing_ok=True)
    return {"wall": wall, "peak": _PEAK.get("last", 0.0), "efficiency": float(found.group(1)) if found else None,
            "bound": found.group(2) if found else "", "time": simulated.group(1) if simulated else "",
            "status": status.group(1) if status else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the runs over a minute")
    args = parser.parse_args(argv)
    lines = ["# Clusters as they are built: 128-1,024 GPUs", "", f"Machine: {machine()}. Fabrics from "
             "`benchmarks.cluster_scale`'s own generator, files without dimensions; each row one fresh "
             "`workbench` process, wall time included (module docstring).", "",
             "## Bounds", "", "| fabric | GPUs | collective | wall | best bound | cut used | target |",
             "|---|---|---|---|---|---|---|"]
    two = ("--chunks", "2", "--set", "chunks=given")  # two chunks per rank at 1 GiB (TACOS sizes only below 256 MB)
    synths = [(128, 1.0, "hierarchical", 120, ()), (128, 1.0, "tacos", 120, ()), (512, 2.0, "tacos", 600, ()),
              (512, 2.0, "tacos", 600, two), (1024, 1.0, "tacos", 600, ()), (1024, 1.0, "tacos", 600, two),
              (512, 2.0, "hierarchical", 600, ())]
    if not args.quick:
        synths += [(128, 1.0, "forestcoll", 120, ()), (512, 1.0, "forestcoll", 600, ()),
                   (512, 2.0, "forestcoll", 600, ()), (1024, 1.0, "forestcoll", 600, ())]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def fabric_file(gpus: int, over: float) -> Path:
            path = folder / f"rail{gpus}_{over:g}.json"
            if not path.exists():
                path.write_text(json.dumps(rail_fabric(gpus // 8, over)))
            return path

        for gpus, over, collective, target in [(1024, 1.0, "allgather", "within 30 s"),
                                               (512, 1.0, "alltoall", ">= 21.1 ms (boxes' NIC cut)"),
                                               (512, 2.0, "alltoall", ">= 21.5 ms (leaf groups' spine cut)")]:
            row = bound_case(fabric_file(gpus, over), collective)
            best = "error" if "error" in row else f"{row['best'] * 1e3:.3f} ms"
            lines.append(f"| rails {over:g}:1 | {gpus:,} | {collective} 1 GiB | {row['wall']:.1f} s | {best} "
                         f"| {row.get('note', row.get('error', ''))} | {target} |")
            print(lines[-1], flush=True)
        lines += ["", "## All-Gather 1 GiB", "", "| fabric | GPUs | method | time limit | wall | peak memory | status "
                  "| simulated | best bound | efficiency |", "|---|---|---|---|---|---|---|---|---|---|"]
        for gpus, over, method, limit, extra in synths:
            row = synth_case(fabric_file(gpus, over), method, limit, folder, extra)
            method = method + (" (2 chunks per rank)" if extra else "")
            if "error" in row:
                lines.append(f"| rails {over:g}:1 | {gpus:,} | {method} | {limit} s | {row['wall']:.1f} s | | "
                             f"{row['error'][:80]} | | | |")
            else:
                efficiency = f"{row['efficiency']:.1f}%" if row["efficiency"] is not None else "-"
                lines.append(f"| rails {over:g}:1 | {gpus:,} | {method} | {limit} s | {row['wall']:.1f} s | "
                             f"{row['peak']:.1f} GB | {row['status']} | {row['time']} | {row['bound']} | {efficiency} |")
            print(lines[-1], flush=True)
    write("cluster_scale.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
