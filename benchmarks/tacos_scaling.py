"""TACOS synthesis time: side by side with the C++ reference (16 to 1,024 NPUs), and growth to 4,096.

All-Gather, 1 chunk per NPU, 1 GiB, alpha 0.5 us, 50 GiB/s (3D-RFS: 200/100/50 GiB/s), seed 0.
"ours" is the ``synthesis_seconds`` that ``Tacos.synthesize`` records (the matching plus building
the workbench algorithm: what a user waits for), median of several runs in one process, with the
compiled engine already loaded; loading it (numba and its cached machine code) costs a fresh
process a fixed amount, measured separately below. The Python engine gives the same schedules
and is shown beside it. The C++ column is astra-sim/tacos v1.3.0 (-O2) on this machine class,
its own "Time to solve" (it builds no schedule), as published in the workbench's issue tracker.

With ``TACOS_CPP`` set, the C++ reference is also run here, interleaved with ours (one run of each in
turn, medians), in the column "C++ here". ``TACOS_CPP`` names either an astra-sim/tacos source
checkout, against which the workbench builds its driver (``benchmarks/tacos_cpp/driver.cpp``, cached
under ``build/tacos_cpp/``; ``benchmarks/tacos_cpp_build.py``), or an executable driver of your own,
linked against astra-sim/tacos. Either is called as ``driver mesh|torus A B [C]`` (Mesh2D, Torus2D,
Hypercube3D or Torus3D of that size, 50 GiB/s, 0.5 us, ``AllGather(npus, 1)``, chunk 1 GiB / npus)
and prints the reference's own two lines, "Time to solve: X ms" and "Collective Time: Y us". Its
collective time is shown beside our greedy estimate (``meta["greedy_time"]``, the same model), a check
that both compute the same kind of schedule.

Growth: the matching alone ("engine"), and with the algorithm built ("with IR") up to
``--ir-max`` NPUs; "optimum" is the exact All-Gather optimum (``workbench.bounds.optimum``, plus its
cut's alpha). Exponents are least-squares slopes of log(time) against log(NPUs) from 64 NPUs up.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks.common import RESULTS, machine, reference_loop, write
from benchmarks.tacos_cpp_build import resolve as resolve_tacos_cpp
from workbench.plugin import call
from formulations.tacos import Tacos, greedy_all_gather, to_algorithm
from workbench.model.collective import make_collective
from workbench.bounds.optimum import allgather_cut_ratio
from workbench.plugin.registry import Problem
from workbench.topology import build

GiB = 2**30
# (topology, C++ seconds measured with astra-sim/tacos v1.3.0 on this machine class; None: not measured)
SIDE_BY_SIDE = [("mesh:4x4", None), ("mesh:8x8", 9.0e-3), ("torus:8x8", 5.9e-3), ("mesh:4x4x4", 6.4e-3),
                ("torus:4x4x4", 4.6e-3), ("mesh:5x5x5", 43e-3), ("mesh:12x12", 108e-3), ("mesh:16x16", 0.605),
                ("mesh:32x32", 50.7)]
FAMILIES = {
    "2D mesh": [f"mesh:{a}x{b}" for a, b in [(4, 4), (8, 4), (8, 8), (16, 8), (16, 16), (32, 16), (32, 32),
                                              (64, 32), (64, 64)]],
    "3D torus": [f"torus:{a}x{b}x{c}" for a, b, c in [(4, 2, 2), (4, 4, 2), (4, 4, 4), (8, 4, 4), (8, 8, 4),
                                                       (8, 8, 8), (16, 8, 8), (16, 16, 8), (16, 16, 16)]],
    "3D-RFS 2x4xN": [f"rfs:2x4x{n}" for n in (2, 4, 8, 16, 32, 64, 128, 256, 512)],
}


def topology_of(spec: str):
    if spec.startswith("rfs:"):
        return build(spec, alpha=0.5e-6, bandwidth=[200 * GiB, 100 * GiB, 50 * GiB])
    return build(spec, alpha=0.5e-6, bandwidth=50 * GiB)


def synthesis_seconds(spec: str, engine: str, repeats: int) -> float:
    return statistics.median(synthesis_sample(spec, engine)[0] for _ in range(repeats))


def synthesis_sample(spec: str, engine: str) -> tuple[float, float]:
    """One synthesis: (synthesis seconds, the greedy's estimate of the collective time in seconds: the
    quantity the reference prints, where the claim is the default simulation's time)."""
    topology = topology_of(spec)
    problem = Problem(topology, make_collective("allgather", topology.num_npus, 1), GiB)
    result = call.synthesize(Tacos(), problem, time_limit=3600, seed=0, engine=engine)
    return result.wall_seconds, result.algorithms[0].meta["greedy_time"]


CPP_LINES = (re.compile(r"Time to solve:\s*([0-9.eE+-]+)\s*ms"), re.compile(r"Collective Time:\s*([0-9.eE+-]+)\s*us"))


def cpp_sample(executable: str, spec: str) -> tuple[float, float]:
    """One run of the C++ reference (``TACOS_CPP``): (its time to solve, its collective time), seconds."""
    kind, dims = spec.split(":")
    done = subprocess.run([executable, kind, *dims.split("x")], capture_output=True, text=True, timeout=3600)
    found = [pattern.search(done.stdout) for pattern in CPP_LINES]
    if done.returncode != 0 or not all(found):
        raise SystemExit(f"TACOS_CPP={executable} {kind} {' '.join(dims.split('x'))}: exit {done.returncode}, "
                         "expected 'Time to solve: X ms' and 'Collective Time: Y us' in its output")
    return float(found[0].group(1)) * 1e-3, float(found[1].group(1)) * 1e-6


def side_by_side(spec: str, repeats: int, executable: str | None) -> dict:
    """Ours (compiled engine) and, given ``executable``, the C++ reference, run in turn ``repeats`` times."""
    ours, cpp = [], []
    for _ in range(repeats):
        ours.append(synthesis_sample(spec, "compiled"))
        if executable:
            cpp.append(cpp_sample(executable, spec))
    return {"ours": statistics.median(s for s, _ in ours), "claimed": ours[0][1],
            "cpp_here": statistics.median(s for s, _ in cpp) if cpp else None,
            "cpp_claimed": cpp[0][1] if cpp else None}


def load_cost(repeats: int = 5) -> float:
    """Seconds a fresh process spends on its first compiled run beyond its second (numba's load)."""
    script = ("import time; from formulations.tacos import greedy_all_gather; "
              "from workbench.model.collective import make_collective; from workbench.topology import build; "
              "t = build('mesh:4x4'); c = make_collective('allgather', 16, 1); s = time.perf_counter(); "
              "greedy_all_gather(t, c, 1e6, 0, engine='compiled'); m = time.perf_counter(); "
              "greedy_all_gather(t, c, 1e6, 0, engine='compiled'); e = time.perf_counter(); "
              "print((m - s) - (e - m))")
    samples = [float(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
                     .stdout) for _ in range(repeats)]
    return statistics.median(samples)


def view_of(topology):
    """The topology as TACOS matches on it: switches unwound (d = 1)."""
    return topology.unwind_switches(1) if topology.num_switches else topology


def load_engines() -> None:
    """Load both of the compiled engine's kernels (one link cost, several) before any timing."""
    for spec in ("mesh:2x2", "rfs:2x2x2"):
        view = view_of(topology_of(spec))
        greedy_all_gather(view, make_collective("allgather", view.num_npus, 1), 1.0, 0, engine="compiled")


def measure(spec: str, ir_max: int) -> dict:
    topology = topology_of(spec)
    n = topology.num_npus
    collective = make_collective("allgather", n, 1)
    view = view_of(topology)
    started = time.perf_counter()
    result = greedy_all_gather(view, collective, GiB / n, seed=0, engine="compiled", record=n <= ir_max)
    engine = time.perf_counter() - started
    with_ir = None
    if n <= ir_max:
        started = time.perf_counter()
        to_algorithm(topology, collective, GiB / n, result, {})
        with_ir = engine + time.perf_counter() - started
    cut = allgather_cut_ratio(topology)  # the exact All-Gather optimum (not timed)
    optimum = GiB / n * cut.seconds_per_byte + cut.alpha
    return {"spec": spec, "npus": n, "engine": engine, "with_ir": with_ir, "transfers": result.deliveries,
            "events": result.events, "claimed": result.claimed_time, "optimum": optimum}


def power_law(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(k, c) of the least-squares fit t = c N^k on log-log axes, over the points from 64 NPUs up."""
    points = [(n, t) for n, t in points if n >= 64 and t > 0]
    if len(points) < 2:
        return None
    k, log_c = np.polyfit(np.log([p[0] for p in points]), np.log([p[1] for p in points]), 1)
    return float(k), float(np.exp(log_c))


def slope(points: list[tuple[int, float]]) -> float | None:
    """The exponent k of ``power_law``."""
    fit = power_law(points)
    return None if fit is None else fit[0]


def headline() -> list[tuple[str, float, float]]:
    problem = Problem(topology_of("rfs:2x4x16"), make_collective("allreduce", 128, 1), GiB)
    samples = [call.synthesize(Tacos(), problem, time_limit=600, seed=seed, switch_degree=1).wall_seconds for seed in range(3)]
    mesh = Problem(topology_of("mesh:32x32"), make_collective("allgather", 1024, 1), GiB)
    return [("128-NPU 3D-RFS All-Reduce, d = 1 (full synthesis, median of 3)", statistics.median(samples), 1.0),
            ("1,024-NPU 2D mesh All-Gather (full synthesis)", call.synthesize(Tacos(), mesh, time_limit=600, seed=0).wall_seconds,
             60.0)]


def plot(side: list[dict], results: dict[str, list[dict]], path) -> None:
    import matplotlib.pyplot as plt

    from workbench.reports.plots import finish_axes

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    meshes = [r for r in side if r["spec"].count("x") == 1 and r["spec"].startswith("mesh")]
    for key, label, marker in (("ours", "ours, compiled", "o"), ("python", "ours, Python engine", "s"),
                               ("cpp", "C++ reference, published", "^"), ("cpp_here", "C++ reference, run here", "v")):
        points = [(r["npus"], r[key]) for r in meshes if r[key] is not None]
        if not points:
            continue
        k = slope(points)
        ax.plot(*zip(*points), marker=marker, label=f"2D mesh, {label}" + (f" (slope {k:.2f})" if k else ""))
    for family, rows in results.items():
        if family != "2D mesh":
            points = [(r["npus"], r["engine"]) for r in rows]
            ax.plot(*zip(*points), linestyle=":", marker=".", label=f"{family}, compiled engine")
    finish_axes(fig, ax, path, "NPUs", "synthesis time (s)", "TACOS All-Gather synthesis time (1 chunk per NPU)",
                log_x=2)


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:,.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench tacos_scaling")
    parser.add_argument("--max-npus", type=int, default=4096)
    parser.add_argument("--ir-max", type=int, default=1024)
    parser.add_argument("--python-max", type=int, default=1024, help="largest size timed with the Python engine")
    args = parser.parse_args(argv)
    executable = os.environ.get("TACOS_CPP") or None
    if executable:  # before any timing: a checkout is built here (once), a bad path stops at once
        executable = resolve_tacos_cpp(executable)
    loop = reference_loop()
    load_engines()
    side = []
    for spec, cpp in SIDE_BY_SIDE:
        npus = topology_of(spec).num_npus
        repeats = 9 if npus <= 256 else 3
        print(f"  side by side {spec} ...", flush=True)
        row = side_by_side(spec, repeats, executable)
        python = synthesis_seconds(spec, "python", 3 if npus <= 256 else 1) if npus <= args.python_max else None
        side.append({"spec": spec, "npus": npus, "python": python, "cpp": cpp, **row})
    load = load_cost()
    results: dict[str, list[dict]] = {}
    for family, specs in FAMILIES.items():
        results[family] = []
        for spec in specs:
            if topology_of(spec).num_npus <= args.max_npus:
                print(f"  {family} {spec} ...", flush=True)
                results[family].append(measure(spec, args.ir_max))
    print("  headline targets ...", flush=True)
    targets = headline()
    ours_slope = slope([(r["npus"], r["ours"]) for r in side if r["spec"].startswith("mesh") and r["spec"].count("x") == 1])
    cpp_slope = slope([(r["npus"], r["cpp"]) for r in side if r["cpp"] and r["spec"].count("x") == 1
                       and r["spec"].startswith("mesh")])
    here_slope = slope([(r["npus"], r["cpp_here"]) for r in side if r["cpp_here"] and r["spec"].count("x") == 1
                        and r["spec"].startswith("mesh")])
    lines = ["# TACOS synthesis time vs NPUs", "", __doc__.strip(), "",
             f"Machine: {machine()}; reference loop (10^7 additions) {loop:.2f} s.", "",
             "## Side by side with the C++ reference", "",
             "| topology | NPUs | ours (ms) | C++ published (ms) | ours / C++ | C++ here (ms) | ours / C++ here "
             "| ours, Python engine (ms) | claimed time, ours / C++ (us) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in side:
        ratio = f"{r['ours'] / r['cpp']:.2f}" if r["cpp"] else "n/a"
        here = f"{r['ours'] / r['cpp_here']:.2f}" if r["cpp_here"] else "n/a"
        claimed = f"{r['claimed'] * 1e6:,.1f}" + (f" / {r['cpp_claimed'] * 1e6:,.1f}" if r["cpp_claimed"] else "")
        lines.append(f"| {r['spec']} | {r['npus']:,} | {_ms(r['ours'])} | {_ms(r['cpp'])} | {ratio} | "
                     f"{_ms(r['cpp_here'])} | {here} | {_ms(r['python'])} | {claimed} |")
    if not executable:
        lines += ["", "The C++ was not run here (no `TACOS_CPP`): the \"C++ here\" columns are empty."]
    lines += ["", f"Fitted exponents on the 2D meshes from 64 NPUs up: ours {ours_slope:.2f}, C++ {cpp_slope:.2f}"
              + (f" (run here: {here_slope:.2f})" if here_slope else "") + ". "
              f"Loading the compiled engine costs a fresh process {load:.2f} s once (median of 5); "
              "`engine: auto` therefore takes the Python engine for small runs in a process that has not loaded "
              "it yet (`formulations.tacos.engines.COMPILED_FROM`).", "",
              "## Targets", "", "| case | seconds | target | met |", "|---|---|---|---|"]
    for label, seconds, target in targets:
        lines.append(f"| {label} | {seconds:.3f} | <= {target:g} | {'yes' if seconds <= target else 'NO'} |")
    lines += ["", "## Growth (compiled engine)", ""]
    for family, rows in results.items():
        k = slope([(r["npus"], r["engine"]) for r in rows])
        lines += [f"### {family}" + (f" (fitted growth exponent {k:.2f})" if k else ""), "",
                  "| topology | NPUs | engine (s) | with IR (s) | useful transfers | events | claimed time (ms) "
                  "| optimum (ms) | optimum / claimed |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ir = f"{r['with_ir']:.3f}" if r["with_ir"] is not None else "not written"
            lines.append(f"| {r['spec']} | {r['npus']:,} | {r['engine']:.3f} | {ir} | {r['transfers']:,} | "
                         f"{r['events']:,} | {r['claimed'] * 1e3:.3f} | {r['optimum'] * 1e3:.3f} | "
                         f"{r['optimum'] / r['claimed']:.1%} |")
        lines.append("")
    lines += ["![scaling](tacos_scaling.png)", "",
              "Regenerate with `make bench-tacos` (about 5 minutes); 4,096 to 40,000 NPUs with "
              "`make bench-tacos-large` ([tacos_large.md](tacos_large.md)).", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(side, results, RESULTS / "tacos_scaling.png")
    write("tacos_scaling.md", "\n".join(lines))


if __name__ == "__main__":
    main()
