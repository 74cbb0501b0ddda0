"""Hostile and careless input, as a user meets it: every case a whole command in its own scratch
folder, run as a fresh process under a 6 GB address-space cap and a 120 s limit, beside a watched
folder that no command names. Each case states what it must end with: the exit code, one line on
stderr (none when it succeeds), the peak memory of the command (its resident set, children
included), the wall seconds, whether the watched folder changed, and a check of its own (a file
kept, a link replaced). ``python -m benchmarks.hostile_probe`` writes ``results/bench/hostile_probe.md``;
``--only WORD`` runs the cases whose name holds WORD.

The cases are the classes of the second hostile-input round: links where the workbench writes,
rows that do not parse, files read whole (5 GB sparse files), FIFOs and devices in run folders,
parameters that scale work, units, a tampered bounds cache, a full disk (a 64 KB tmpfs, when the
machine lets this process mount one), and a tune bundle over an earlier one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from benchmarks.common import machine, write

ROOT = Path(__file__).resolve().parent.parent
LIBRA = ROOT / "data" / "libra"
CAP = 6 * 2**30  # address space per command, as the probe ran them
LIMIT = 120.0
FIVE_GB = 5 * 10**9
TINY = ("name: tiny\ngrid:\n  topologies: [ring:4]\n  collectives: [allgather]\n  sizes: [1MB, 2MB]\n"
        "  formulations: [ring]\n")
SYNTH = ["synth", "ring", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB"]


@dataclass
class Case:
    """A command to run in ``scratch`` after ``setup``; what it must end with."""

    name: str
    kind: str
    setup: Callable[[Path, Path], list[str]]  # (scratch, watched) -> argv
    code: int = 2
    check: Callable[[Path, Path], str | None] = lambda scratch, watched: None  # why it failed, or None
    lines: int | None = None  # stderr lines; None: one for a refusal, any for a success; -1: any
    says: str = ""  # what the last stderr line must hold
    temp: bool = False  # the command's temporary folder (TMPDIR) is scratch/tmp, which setup may fill


def _digest(folder: Path) -> str:
    digest = hashlib.sha1()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _sparse(path: Path, head: bytes = b"") -> Path:
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(FIVE_GB)
    return path


def _workbench(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=LIMIT)


def _run_folder(scratch: Path) -> Path:
    (scratch / "tiny.yaml").write_text(TINY)
    done = _workbench(["run", "tiny.yaml", "--out", "run", "--no-figures"], scratch)
    assert done.returncode == 0, done.stderr
    return scratch / "run"


def _algorithm(scratch: Path) -> Path:
    assert _workbench(SYNTH + ["-o", "ring.json"], scratch).returncode == 0
    return scratch / "ring.json"


# ------------------------------------------------------------------------------------ the cases
def _link_cases() -> list[Case]:
    def output_link(scratch, watched):
        (scratch / "out.json").symlink_to(watched / "victim.json")
        return SYNTH + ["-o", "out.json"]

    def dangling(scratch, watched):
        (scratch / "out.json").symlink_to(watched / "new" / "out.json")
        return SYNTH + ["-o", "out.json"]

    def replaced(scratch, watched):
        return None if (scratch / "out.json").is_file() and not (scratch / "out.json").is_symlink() \
            else "the link was not replaced by the file"

    def rows_link(scratch, watched):
        folder = _run_folder(scratch)
        (folder / "rows.jsonl").unlink()
        (folder / "rows.jsonl").symlink_to(watched / "victim.jsonl")
        return ["run", "tiny.yaml", "--out", "run", "--no-figures"]

    def figure_link(scratch, watched):
        folder = _run_folder(scratch)
        (folder / "figures").mkdir()
        (folder / "figures" / "synthesis_vs_time.png").symlink_to(watched / "victim.json")
        return ["report", "run"]

    def export_link(scratch, watched):
        _algorithm(scratch)
        (scratch / "out.xml").symlink_to(watched / "victim.json")
        return ["export", "ring.json", "-o", "out.xml"]

    return [Case("synth -o a link to a file elsewhere", "link", output_link, 0, replaced),
            Case("synth -o a dangling link", "link", dangling, 0, replaced),
            Case("run resumed with rows.jsonl a link", "link", rows_link),
            Case("report with a figure a link", "link", figure_link, 0),
            Case("export -o a link", "link", export_link, 0)]


def _rows_cases() -> list[Case]:
    def damaged(scratch, watched):
        folder = _run_folder(scratch)
        lines = (folder / "rows.jsonl").read_bytes().split(b"\n")
        lines[0] += b","
        lines.insert(1, b"\xff\xfe stray")
        (folder / "rows.jsonl").write_bytes(b"\n".join(lines))
        return ["rebound", "run"]

    def kept(scratch, watched):
        aside = scratch / "run" / "rows.unparsed.jsonl"
        return None if aside.is_file() and b"\xff\xfe stray" in aside.read_bytes() else "the lines were not kept"

    return [Case("rebound on rows with a trailing comma and stray bytes", "rows", damaged, 0, kept)]


def _sparse_cases() -> list[Case]:
    def given(suffix: str, argv: Callable[[str], list[str]], head: bytes = b""):
        def setup(scratch, watched):
            _sparse(scratch / f"big{suffix}", head)
            return argv(f"big{suffix}")
        return setup

    libra = ["--communicator", str(LIBRA / "communicator" / "GPT_3_4d.yml"), "--cost",
             str(LIBRA / "cost_model" / "4d_cost_model.yml"), "--budget", "1000GB/s"]

    def grown_rows(command: list[str]):
        def setup(scratch, watched):
            folder = _run_folder(scratch)
            with open(folder / "rows.jsonl", "ab") as handle:
                handle.truncate(FIVE_GB)
            return command
        return setup

    return [Case("interpret a 5 GB XML", "sparse", given(".xml", lambda f: ["interpret", f])),
            Case("interpret a 5 GB plan", "sparse", given(".json", lambda f: ["interpret", f], b"{")),
            Case("import a 5 GB XML", "sparse", given(".xml", lambda f: ["import", f, "--topology", "ring:4",
                                                                          "--size", "1MB", "-o", "o.json"])),
            Case("export a 5 GB algorithm file", "sparse", given(".json", lambda f: ["export", f, "-o", "o.xml"],
                                                                b"{")),
            Case("synth --demand a 5 GB file", "sparse", given(".yaml", lambda f: [*SYNTH[:4], "--size", "1MB",
                                                                                     "--demand", f, "-o", "o.json"])),
            Case("run a 5 GB config", "sparse", given(".yaml", lambda f: ["run", f])),
            Case("taccl with a 5 GB sketch", "sparse", given(".yaml", lambda f: [
                "synth", "taccl", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB",
                "--set", f"sketch={f}", "-o", "o.json"])),
            Case("libra with a 5 GB workload", "sparse", given(".txt", lambda f: [
                "libra", "--network", str(LIBRA / "network" / "4d_network.yml"), "--workload", f, *libra])),
            Case("report on rows grown to 5 GB", "sparse", grown_rows(["report", "run"])),
            Case("rebound on rows grown to 5 GB", "sparse", grown_rows(["rebound", "run"])),
            Case("run resumed on rows grown to 5 GB", "sparse", grown_rows(["run", "tiny.yaml", "--out", "run"]))]


def _special_cases() -> list[Case]:
    def special(name: str, kind: str, command: list[str]):
        def setup(scratch, watched):
            folder = _run_folder(scratch)
            (folder / name).unlink(missing_ok=True)
            if kind == "FIFO":
                os.mkfifo(folder / name)
            else:
                (folder / name).symlink_to("/dev/zero")
            return command
        return setup

    cases = []
    for name in (".lock", "config.yaml", "rows.jsonl"):
        for kind in ("FIFO", "/dev/zero link"):
            for command in (["run", "tiny.yaml", "--out", "run"], ["report", "run"], ["rebound", "run"]):
                cases.append(Case(f"{command[0]} with {name} a {kind}", "run folder",
                                  special(name, kind, command)))
    return cases


def _parameter_cases() -> list[Case]:
    def synth(name: str, *sets: str):
        return lambda scratch, watched: ["synth", name, "--topology", "ring:4", "--collective", "allgather",
                                         "--size", "1MB", *[w for s in sets for w in ("--set", s)], "-o", "o.json"]

    def periodic(scratch, watched):
        from workbench.kit.examples import ring_allgather
        from workbench.model.periodic import repeated

        repeated(ring_allgather(2, 1e6), 4).save(scratch / "p.json")
        document = json.loads((scratch / "p.json").read_text())
        document["period"]["repeat"] = 1_000_000
        (scratch / "p.json").write_text(json.dumps(document))
        return ["export", "p.json", "--format", "mscclpp", "-o", "plan.json"]

    return [Case("multipath chunks=1e9", "parameter", synth("multipath", "chunks=1000000000")),
            Case("forestcoll pieces=1e9", "parameter", synth("forestcoll", "pieces=1000000000")),
            Case("teccl epochs=1e6", "parameter", synth("teccl", "epochs=1000000")),
            Case("sccl steps=rounds=1e6", "parameter", synth("sccl", "steps=1000000", "rounds=1000000")),
            Case("syccl depths=x", "parameter", synth("syccl", "depths=x")),
            Case("export --format mscclpp of a 3 KB file with repeat 1e6", "parameter", periodic)]


def _unit_cases() -> list[Case]:
    def bandwidth(value: str):
        return lambda scratch, watched: SYNTH + ["--bandwidth", value, "-o", "o.json"]

    def bits_are_bits(scratch, watched):
        document = json.loads((scratch / "o.json").read_text())
        bandwidths = {link["bandwidth"] for link in document["topology"]["links"]}
        return None if bandwidths == {5e9 / 8} else f"bandwidths {bandwidths}, not 5 Gb/s = 0.625 GB/s"

    return [Case("--bandwidth 5Gb/s", "unit", bandwidth("5Gb/s"), 0, bits_are_bits),
            Case("--bandwidth 5gb/s (ambiguous)", "unit", bandwidth("5gb/s")),
            Case("--bandwidth 1e-300", "unit", bandwidth("1e-300")),
            Case("--bandwidth 1e308", "unit", bandwidth("1e308")),
            Case("bounds --size 0", "unit", lambda s, w: ["bounds", "--topology", "ring:4", "--collective",
                                                          "allgather", "--size", "0"])]


def _cache_cases() -> list[Case]:
    def tampered(scratch, watched):
        folder = _run_folder(scratch)
        for entry in (folder / "bounds").glob("*.json"):
            data = json.loads(entry.read_text())
            data.update({key: 1.0 for key in data if isinstance(data[key], float)})
            entry.write_text(json.dumps(data))
        (scratch / "tiny.yaml").write_text(TINY.replace("[ring]", "[ring, direct]"))
        return ["run", "tiny.yaml", "--out", "run", "--no-figures"]

    def honest(scratch, watched):
        rows = [json.loads(line) for line in (scratch / "run" / "rows.jsonl").read_text().splitlines()]
        bad = [r["cell_id"] for r in rows if r.get("status") == "optimal" or (r.get("efficiency") or 0) > 1]
        return f"rows {bad} claim optimal or efficiency > 1" if bad else None

    return [Case("a cached bound above every simulated time", "cache", tampered, 0, honest)]


def _disk_and_bundle_cases() -> list[Case]:
    def full_disk(scratch, watched):
        mount = scratch / "small"
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True,
                       capture_output=True)
        grid = TINY.replace("[1MB, 2MB]", "[" + ", ".join(f"{2**i}KB" for i in range(14)) + "]")
        (scratch / "many.yaml").write_text(grid.replace("[ring]", "[ring, direct]") +
                                           "evaluation:\n  save_algorithms: true\n")
        return ["run", "many.yaml", "--out", str(mount / "run"), "--no-figures"]

    def bundle(scratch, watched):
        tune = ["tune", "--topology", "ring:4", "--collective", "allgather", "--formulations", "ring", "-o", "b"]
        assert _workbench(tune + ["--sizes", "64KB..4MB"], scratch).returncode == 0
        return tune + ["--sizes", "64KB..256KB"]

    def no_stale(scratch, watched):
        names = sorted(p.name for p in (scratch / "b" / "msccl").iterdir())
        return None if names == ["allgather-0.xml", "allgather-1.xml"] else f"msccl/ holds {names}"

    def whole_rows(scratch, watched):  # progress lines for the cells that finished, then the error
        rows = scratch / "small" / "run" / "rows.jsonl"
        whole = rows.read_bytes().endswith(b"\n") if rows.exists() else True
        return None if whole else f"{rows} ends in a partial row"

    cases = [Case("tune over an earlier, wider bundle", "bundle", bundle, 0, no_stale)]
    if os.geteuid() == 0 and shutil.which("mount"):
        cases.append(Case("run onto a full disk (64 KB tmpfs)", "disk", full_disk, 2, whole_rows, lines=-1,
                          says="rows.jsonl: no space left on device"))
    return cases


def _lock_cases() -> list[Case]:
    """The compile lock: a compiled simulate (a periodic file of 200,000 transfers) with the lock
    folder made first by another user, or with FIFOs where its lock files go."""
    def periodic(scratch: Path) -> list[str]:
        from workbench.kit.examples import ring_allgather
        from workbench.model.periodic import repeated

        repeated(ring_allgather(2, 1e6), 4).save(scratch / "p.json")
        document = json.loads((scratch / "p.json").read_text())
        document["period"]["repeat"] = 100_000  # 200,000 transfers: the compiled replays run
        (scratch / "p.json").write_text(json.dumps(document))
        (scratch / "tmp").mkdir()
        return ["simulate", "p.json"]

    def foreign_folder(scratch, watched):
        argv = periodic(scratch)
        folder = scratch / "tmp" / f"workbench-{os.getuid()}"
        folder.mkdir(mode=0o777)
        os.chmod(folder, 0o777)
        if os.geteuid() == 0:
            os.chown(folder, 65534, 65534)  # nobody's
        return argv

    def fifos(scratch, watched):
        import workbench.compiled.simulate as simulate_kernels
        import workbench.compiled.verify as verify_kernels
        from workbench.compiled import first_call

        argv = periodic(scratch)
        saved, tempfile.tempdir = tempfile.tempdir, str(scratch / "tmp")
        try:
            for module, names in ((simulate_kernels, ["in_order_periodic"]), (verify_kernels, [
                    "file_order_replay", "first_unmet_postcondition", "timeline_replay"])):
                for name in names:
                    os.mkfifo(first_call._lock_path(name, module.__file__))
        finally:
            tempfile.tempdir = saved
        return argv

    return [Case("compiled simulate, lock folder made by another user", "lock", foreign_folder, 0, temp=True),
            Case("compiled simulate, FIFOs at the lock files", "lock", fifos, 0, temp=True)]


def cases() -> list[Case]:
    return (_link_cases() + _rows_cases() + _sparse_cases() + _special_cases() + _lock_cases() + _parameter_cases()
            + _unit_cases() + _cache_cases() + _disk_and_bundle_cases())


# ------------------------------------------------------------------------------------ running one
def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
    os.setsid()


# The command runs under this wrapper, which reports the peak resident set of the command and
# everything it started (its children's ru_maxrss) into the file named by PROBE_PEAK.
_WRAPPER = ("import os, resource, subprocess, sys\n"
            "code = subprocess.run(sys.argv[1:]).returncode\n"
            "open(os.environ['PROBE_PEAK'], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
            "sys.exit(code)\n")


def run_case(case: Case) -> dict:
    with tempfile.TemporaryDirectory(prefix="probe-") as base:
        scratch, watched = Path(base) / "case", Path(base) / "watched"
        scratch.mkdir()
        (watched / "inner").mkdir(parents=True)
        (watched / "victim.json").write_text('{"keep": true}\n')
        (watched / "victim.jsonl").write_text('{"cell_id": "x"}\n')
        argv = case.setup(scratch, watched)
        before = _digest(watched)
        started = time.perf_counter()
        peak_file = Path(base) / "peak"
        try:
            done = subprocess.run([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "workbench", *argv],
                                  cwd=scratch, capture_output=True, text=True, timeout=LIMIT, preexec_fn=_capped,
                                  env={**os.environ, "PROBE_PEAK": str(peak_file),
                                       **({"TMPDIR": str(scratch / "tmp")} if case.temp else {})})
            code, err = done.returncode, done.stderr.strip().splitlines()
        except subprocess.TimeoutExpired:
            code, err = "hang", []
        seconds = time.perf_counter() - started
        peak = float(peak_file.read_text()) * 1024.0 if peak_file.exists() else float("nan")
        problems = []
        if code != case.code:
            problems.append(f"exit {code}, expected {case.code}")
        wanted_lines = case.lines if case.lines is not None else (1 if case.code == 2 else -1)
        if wanted_lines >= 0 and len(err) != wanted_lines:
            problems.append(f"{len(err)} stderr lines")
        if case.says and not (err and case.says in err[-1]):
            problems.append(f"the last line does not say {case.says!r}")
        if any("Traceback" in line for line in err):
            problems.append("a traceback")
        if _digest(watched) != before:
            problems.append("the watched folder changed")
        why = case.check(scratch, watched)
        if why:
            problems.append(why)
        if (scratch / "small").is_dir():
            subprocess.run(["umount", str(scratch / "small")], capture_output=True)
    return {"name": case.name, "kind": case.kind, "code": code, "seconds": seconds, "peak": peak,
            "line": err[-1] if err else "", "problems": problems}


def report(results: list[dict]) -> str:
    clean = sum(not r["problems"] for r in results)
    lines = ["# Hostile and careless input: the second round's classes as whole commands", "",
             f"{machine()}. Each case: a fresh process in its own scratch folder, {CAP / 2**30:.0f} GB address-space "
             f"cap, {LIMIT:.0f} s limit, a watched folder beside it. Peak memory: the largest resident set of the "
             f"command and the processes it started. Seconds: wall time of the whole command, interpreter start-up "
             f"included.", "",
             f"**{clean} of {len(results)} cases clean.**", "",
             "| class | case | exit | seconds | peak memory | last stderr line | problems |", "|---|---|---|---|---|---|---|"]
    for r in results:
        line = r["line"].replace("|", "\\|")
        line = line if len(line) <= 110 else line[:107] + "..."
        lines.append(f"| {r['kind']} | {r['name']} | {r['code']} | {r['seconds']:.2f} | {r['peak'] / 1e6:,.0f} MB "
                     f"| {line} | {'; '.join(r['problems']) or 'none'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose name holds this word")
    parser.add_argument("--no-write", action="store_true", help="print the table, write no file")
    args = parser.parse_args(argv)
    results = []
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        result = run_case(case)
        results.append(result)
        print(f"{'ok ' if not result['problems'] else 'BAD'} {case.kind:<10} {case.name:<55} exit {result['code']} "
              f"{result['seconds']:.2f} s  {'; '.join(result['problems'])}", flush=True)
    text = report(results)
    if args.no_write:
        print(text)
    else:
        write("hostile_probe.md", text)
    return 0 if all(not r["problems"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
