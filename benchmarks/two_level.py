"""two-level at cluster scale: rail fabrics of 256, 512 and 1,024 GPUs, as built (recorded dimensions)
and as topology files without them, against the best lower bound.

Each case is one fresh ``workbench synth two-level`` under ``/usr/bin/time -v`` (start-up, layout,
cost model, the schedule, its claim, the verification and simulation ``synth`` does, and the bounds
it prints), run ``--repeats`` times: the wall seconds quoted are the median, the peak memory the
largest of the runs (``Maximum resident set size``: the command or its synthesis child, whichever is
larger). The bound is ``workbench bounds``'s best (the group gossip bound on these fabrics) and
"% of bound" is bound / simulated time. Targets: All-Reduce at 1 GiB 95%, at 16 MB 75%,
Reduce-Scatter at 1 GiB 95%, each within 10 minutes. TACOS and ForestColl on the 256-GPU fabric
are measured beside them for reference (one run each).

``python -m benchmarks.two_level [--repeats N] [--quick]`` writes ``results/bench/two_level.md`` and
``two_level.json`` (``--quick``: 256 and 512 GPUs only, one run each).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, machine, write

ROOT = Path(__file__).resolve().parent.parent
FABRICS = [("rails:32x8", 256), ("rails:64x8", 512), ("rails:128x8", 1024)]
CASES = [("allreduce", "1GiB", 0.95), ("allreduce", "16MB", 0.75), ("reducescatter", "1GiB", 0.95)]
REFERENCE = [("tacos", "rails:32x8", "allreduce", "1GiB"), ("tacos", "rails:32x8", "allreduce", "16MB"),
             ("forestcoll", "rails:32x8", "allreduce", "1GiB")]
LIMIT = 600  # seconds: the target's, given to synth as its time limit
RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def _workbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, cwd=ROOT)


def topology_file(spec: str, folder: Path) -> Path:
    """``spec`` written by ``workbench topology -o``: nodes and links only, no recorded dimensions."""
    path = folder / (spec.replace(":", "_") + ".json")
    done = _workbench("topology", spec, "-o", str(path))
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    if "meta" in json.loads(path.read_text()):
        raise RuntimeError(f"{path} records its dimensions; the case needs a file without them")
    return path


def best_bound(topology: str, collective: str, size: str) -> float:
    """``workbench bounds``'s best lower bound, in seconds."""
    done = _workbench("bounds", "--topology", topology, "--collective", collective, "--size", size, "--json")
    return float(json.loads(done.stdout)["best"])


def synth_once(method: str, topology: str, collective: str, size: str, folder: Path) -> dict:
    """One fresh ``synth`` under ``/usr/bin/time -v``: wall seconds, peak RSS (GB), the simulated time
    (the claim, which ``synth`` checks by simulating the file in the same model) and ``meta``."""
    out = folder / "algorithm.json"
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "workbench", "synth", method, "--topology",
                           topology, "--collective", collective, "--size", size, "--time-limit", f"{LIMIT}s",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    peak = int(RSS.search(done.stderr).group(1)) / 1e6 if RSS.search(done.stderr) else float("nan")
    if done.returncode != 0 or not out.exists():
        return {"wall": wall, "peak_gb": peak, "error": (done.stdout + done.stderr).strip().splitlines()[-1:]}
    meta = json.loads(out.read_text())["meta"]
    printed = re.search(r"efficiency\s+([\d.]+)%", done.stdout)
    return {"wall": wall, "peak_gb": peak, "simulated": meta["claimed_time"], "meta": meta,
            "printed_efficiency": float(printed.group(1)) if printed else None}


def measure(method: str, topology: str, collective: str, size: str, repeats: int, folder: Path) -> dict:
    """``repeats`` runs of one case: the median wall, the largest peak, the first run's schedule."""
    runs = [synth_once(method, topology, collective, size, folder) for _ in range(repeats)]
    failed = [r for r in runs if "error" in r]
    if failed:
        return {"error": " ".join(failed[0]["error"]), "wall": statistics.median(r["wall"] for r in runs)}
    first = runs[0]
    keep = ("pieces", "exchanges", "estimated_time", "layout")
    return {"wall": statistics.median(r["wall"] for r in runs), "walls": [round(r["wall"], 2) for r in runs],
            "peak_gb": max(r["peak_gb"] for r in runs), "simulated": first["simulated"],
            "printed_efficiency": first["printed_efficiency"],
            **{k: first["meta"][k] for k in keep if k in first["meta"]}}


def _row(fabric: str, dims: str, method: str, collective: str, size: str, bound: float, result: dict,
         target: float | None) -> tuple[str, dict]:
    """A table line and its record."""
    if "error" in result:
        return (f"| {fabric} | {dims} | {method} | {collective} | {size} | {bound * 1e3:.4f} ms | error | | "
                f"{'' if target is None else f'{target:.0%}'} | | {result['wall']:.1f} s | | "
                f"{result['error'][:60]} |"), {**result, "bound": bound}
    share = bound / result["simulated"]
    met = "" if target is None else ("yes" if share >= target and result["wall"] <= LIMIT else "no")
    choice = f"P={result['pieces']}, {result['exchanges']['box']}/{result['exchanges']['rail']}" \
        if "exchanges" in result else ""
    line = (f"| {fabric} | {dims} | {method} | {collective} | {size} | {bound * 1e3:.4f} ms | "
            f"{result['simulated'] * 1e3:.4f} ms | {share:.1%} | {'' if target is None else f'{target:.0%}'} | "
            f"{met} | {result['wall']:.1f} s | {result['peak_gb']:.2f} GB | {choice} |")
    return line, {**result, "bound": bound, "share_of_bound": share, "target": target, "met": met}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the median wall is quoted")
    parser.add_argument("--quick", action="store_true", help="256 and 512 GPUs, one run each, no reference")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    fabrics = FABRICS[:2] if args.quick else FABRICS
    lines = ["# two-level at cluster scale: 256-1,024 GPUs", "",
             f"Machine: {machine()}. One fresh `workbench synth` a run under `/usr/bin/time -v`; wall: the median "
             f"of {repeats} run(s) (whole command), peak: the largest maximum RSS; bound: `workbench bounds`'s best; "
             "% of bound = bound / simulated time. `python -m benchmarks.two_level` (module docstring).", "",
             "| fabric | dimensions | method | collective | size | best bound | simulated | % of bound | target "
             "| met | synth wall | peak RSS | choice |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for spec, gpus in fabrics:
            for topology, dims in ((spec, "recorded"), (str(topology_file(spec, folder)), "none (file)")):
                for collective, size, target in CASES:
                    bound = best_bound(topology, collective, size)
                    result = measure("two-level", topology, collective, size, repeats, folder)
                    line, record = _row(f"{spec} ({gpus:,})", dims, "two-level", collective, size, bound, result,
                                        target)
                    lines.append(line)
                    records.append({"fabric": spec, "gpus": gpus, "dimensions": dims, "method": "two-level",
                                    "collective": collective, "size": size, **record})
                    print(line, flush=True)
        for method, spec, collective, size in [] if args.quick else REFERENCE:
            bound = best_bound(spec, collective, size)
            line, record = _row(spec, "recorded", method, collective, size, bound,
                                measure(method, spec, collective, size, 1, folder), None)
            lines.append(line)
            records.append({"fabric": spec, "dimensions": "recorded", "method": method, "collective": collective,
                            "size": size, **record})
            print(line, flush=True)
    write("two_level.md", "\n".join(lines) + "\n")
    (RESULTS / "two_level.json").write_text(json.dumps({"machine": machine(), "repeats": repeats,
                                                        "rows": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
