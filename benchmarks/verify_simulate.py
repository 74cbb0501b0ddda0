"""Verifier and simulator throughput on a ~1,000,000-transfer algorithm.

Ring all-reduce (reduce-scatter then all-gather, 2(n-1) steps of n transfers) on a
unidirectional ring of 708 ranks: 2 * 707 * 708 = 1,001,112 transfers. JSON parsing is timed
separately and not counted in the verifier or simulator numbers; the end-to-end rows count it
(target: load, verify and simulate a million transfers in under 5 s). Both engines are timed: the
compiled one (numba: ``workbench.compiled.verify``, ``workbench.compiled.simulate``), which the
default ``auto`` takes from 200,000 transfers, and the Python one; both readers too (msgspec's
typed records, which the loader takes for files over a megabyte, and the usual orjson one).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import machine, reference_loop, timed, write
from workbench.util import fastjson
from workbench.model.algorithm import load_algorithm
from workbench.kit.examples import ring_allreduce
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify

TARGET_SECONDS = 10.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench verify_simulate")
    parser.add_argument("--ranks", type=int, default=708)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.ranks
    print(f"building ring all-reduce on {n} ranks ...", flush=True)
    build_s, _, algo = timed(lambda: ring_allreduce(n, 1e6), 1)
    count = len(algo.transfers)
    rows = []

    def measure(label: str, func, repeats: int = args.repeats):
        print(f"  {label} ...", flush=True)
        median, samples, result = timed(func, repeats)
        rows.append((label, median, samples))
        return result

    simulate(ring_allreduce(4, 1e6), engine="compiled")  # load numba and the cached kernels first
    verify(ring_allreduce(4, 1e6), engine="compiled")
    sim = measure("simulate (pipelined, in-order: the default), compiled", lambda: simulate(algo, engine="compiled"))
    python_sim = measure("simulate (pipelined, in-order: the default), Python", lambda: simulate(algo, engine="python"))
    if not (sim.end == python_sim.end).all():
        raise SystemExit("the two simulators disagree")
    measure("simulate (blocking, in-order), compiled", lambda: simulate(algo, link_model="blocking"))
    measure("simulate (pipelined, fifo), Python only", lambda: simulate(algo, order="fifo"), repeats=1)
    measure("verify (file-order replay + timeline agreement, incl. its simulation), compiled",
            lambda: verify(algo, engine="compiled"))
    measure("verify (file-order replay + timeline agreement, incl. its simulation), Python",
            lambda: verify(algo, engine="python"))
    measure("verify (file-order replay only), compiled", lambda: verify(algo, timeline=False, engine="compiled"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ar.json"
        measure("write JSON (not counted above)", lambda: algo.save(path))
        measure("load JSON, typed reader (not counted above)", lambda: load_algorithm(path))
        import workbench.model.algorithm_io as reader
        typed_from = reader.TYPED_FROM_BYTES
        reader.TYPED_FROM_BYTES = 1 << 62
        measure("load JSON, usual reader (not counted above)", lambda: load_algorithm(path))
        reader.TYPED_FROM_BYTES = typed_from

        def end_to_end():
            return verify(load_algorithm(path)).simulation  # the default simulation comes with the verdict

        measure("end to end in this process: load + verify (with its default simulation), as "
                "`workbench simulate`", end_to_end)
        script = ("from workbench.model.algorithm import load_algorithm; from workbench.checking.verify import verify; "
                  "import sys; verify(load_algorithm(sys.argv[1]))")
        measure("end to end in a fresh process (adds start-up and loading numba)",
                lambda: subprocess.run([sys.executable, "-c", script, str(path)], check=True, capture_output=True))
        command = [sys.executable, "-m", "workbench", "simulate", str(path)]
        measure("`workbench simulate FILE`, whole command (adds the lower bounds and the report)",
                lambda: subprocess.run(command, check=True, capture_output=True), repeats=1)
    lines = [
        "# Verifier and simulator on a 1,000,000-transfer algorithm",
        "",
        f"Ring all-reduce on a unidirectional ring of {n} ranks: {count:,} transfers, 1 MB chunks "
        f"(built in {build_s:.1f} s). Simulated collective time {sim.collective_time * 1e3:.3f} ms.",
        f"Machine: {machine()}; reference loop {reference_loop():.2f} s (10^7 additions, best of 3; "
        f"lower is a faster machine). JSON engine: {fastjson.ENGINE}. Median of {args.repeats} runs (fifo and the "
        f"whole command: one run). "
        f"Target: verifier and default simulator each <= {TARGET_SECONDS:.0f} s.",
        "",
        "| step | median (s) | samples (s) | transfers/s |",
        "|---|---|---|---|",
    ]
    for label, median, samples in rows:
        lines.append(f"| {label} | {median:.2f} | {', '.join(f'{s:.2f}' for s in samples)} | {count / median:,.0f} |")
    verdicts = {label: median for label, median, _ in rows}
    sim_ok = verdicts["simulate (pipelined, in-order: the default), compiled"] <= TARGET_SECONDS
    ver_ok = verdicts["verify (file-order replay + timeline agreement, incl. its simulation), compiled"] <= TARGET_SECONDS
    e2e = [m for label, m in verdicts.items() if label.startswith("end to end in this")][0]
    fresh = [m for label, m in verdicts.items() if label.startswith("end to end in a fresh")][0]
    lines += ["", f"Simulator target met: {'yes' if sim_ok else 'NO'}. Verifier target met: {'yes' if ver_ok else 'NO'}. "
              f"End to end under 5 s: {'yes' if e2e < 5.0 else 'NO'} ({e2e:.2f} s in this process, "
              f"{fresh:.2f} s in a fresh one).",
              "", "Regenerate with `make bench`.", ""]
    write("verify_simulate.md", "\n".join(lines))


if __name__ == "__main__":
    main()
