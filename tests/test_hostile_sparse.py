"""Files read whole before any guard: a 5 GB sparse file (no disk used) given to every reader of a
user file is refused by its length, before a byte is read, in one line naming the file, exit 2,
in little memory and few bytes read; a rows file grown past the guard is refused the same way. The
budget is fixed with ``--max-memory`` so that the verdict does not depend on the machine."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from guards import deadline
from workbench.cli import main
from workbench.util import size_guard
from workbench.util.safe_load import InputError, read_bytes, read_input

ROOT = Path(__file__).resolve().parents[1]
LIBRA = ROOT / "data" / "libra"
FIVE_GB = 5 * 10**9
BUDGET = ["--max-memory", "8GB"]


def _sparse(path: Path, length: int = FIVE_GB, head: bytes = b"") -> Path:
    """A file of ``length`` bytes that takes no disk: ``head``, then a hole."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(length)
    return path


@pytest.fixture()
def big(tmp_path) -> dict[str, Path]:
    return {suffix: _sparse(tmp_path / f"big{suffix}", head=b"{" if suffix == ".json" else b"")
            for suffix in (".json", ".yaml", ".xml", ".txt", ".yml")}


def _bytes_read() -> int | None:
    """Bytes this process has read through read() calls so far (Linux ``/proc/self/io``; None elsewhere)."""
    try:
        with open("/proc/self/io") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("rchar:"))
    except (OSError, StopIteration, ValueError):
        return None


def _refused(capsys, argv: list[str], named: Path, why: str = "budget") -> str:
    """Run ``argv``: exit 2, one stderr line naming ``named`` and saying ``why``, in 50 MB and with
    under 100 MB read, counting the modules a command imports on first use (the 5 GB file is not
    read); under a hang guard. How fast a refusal is on a quiet machine is measured by
    ``benchmarks/hostile_probe.py``, not asserted on a shared one."""
    capsys.readouterr()
    tracemalloc.start()
    before = _bytes_read()
    try:
        with deadline(30.0):
            code = main(argv)
        read = None if before is None else _bytes_read() - before
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0] and str(named) in err[0], err
    assert why in err[0], err
    assert peak < 50e6 and (read is None or read < 100e6), (peak, read)
    return err[0]


def test_every_file_reader_refuses_a_5gb_sparse_file_by_its_length(tmp_path, big, capsys):
    out = tmp_path / "out"
    cases = [
        (["interpret", str(big[".xml"])], big[".xml"]),
        (["interpret", str(big[".json"])], big[".json"]),
        (["import", str(big[".xml"]), "--topology", "ring:4", "--size", "1MB", "-o", f"{out}.json"], big[".xml"]),
        (["export", str(big[".json"]), "-o", f"{out}.xml"], big[".json"]),
        (["verify", str(big[".json"])], big[".json"]),
        (["simulate", str(big[".json"])], big[".json"]),
        (["topology", str(big[".yaml"])], big[".yaml"]),
        (["synth", "ring", "--topology", "ring:4", "--size", "1MB", "--demand", str(big[".yaml"]), "-o",
          f"{out}.json"], big[".yaml"]),
        (["run", str(big[".yaml"]), "--out", str(out)], big[".yaml"]),
        (["synth", "taccl", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB", "--set",
          f"sketch={big['.yaml']}", "-o", f"{out}.json"], big[".yaml"]),
        (["libra", "--network", str(LIBRA / "network" / "4d_network.yml"), "--workload", str(big[".txt"]),
          "--communicator", str(LIBRA / "communicator" / "GPT_3_4d.yml"), "--cost",
          str(LIBRA / "cost_model" / "4d_cost_model.yml"), "--budget", "1000GB/s"], big[".txt"]),
        (["libra", "--network", str(big[".yml"]), "--workload", str(LIBRA / "workload" / "GPT_3.txt"),
          "--communicator", str(LIBRA / "communicator" / "GPT_3_4d.yml"), "--cost",
          str(LIBRA / "cost_model" / "4d_cost_model.yml"), "--budget", "1000GB/s"], big[".yml"]),
    ]
    for argv, named in cases:
        _refused(capsys, argv + BUDGET, named)
    assert not list(tmp_path.glob("out*"))  # nothing half-written


def test_a_rows_file_grown_past_the_guard_is_refused_by_report_rebound_and_resume(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text("name: tiny\ngrid:\n  topologies: [ring:4]\n  collectives: [allgather]\n  sizes: [1MB]\n"
                      "  formulations: [ring]\n")
    folder = tmp_path / "run"
    assert main(["run", str(config), "--out", str(folder), "--no-figures"]) == 0
    rows = folder / "rows.jsonl"
    kept = rows.read_bytes()
    with open(rows, "ab") as handle:  # the rows, then a 5 GB hole
        handle.truncate(FIVE_GB)
    for argv in (["report", str(folder), "--no-figures"], ["rebound", str(folder)]):
        _refused(capsys, argv + BUDGET, rows)
    # resuming would mend a crash's partial last line; 5 GB without a newline is none, and is not cut
    _refused(capsys, ["run", str(config), "--out", str(folder), "--no-figures"] + BUDGET, rows, "without a newline")
    with open(rows, "rb") as handle:
        assert os.path.getsize(rows) == FIVE_GB and handle.read(len(kept)) == kept  # untouched


def test_the_guard_counts_what_a_file_grows_by_while_it_is_read(tmp_path, monkeypatch):
    """A file longer than its stated length (grown after it was sized; a /proc file says 0 bytes)
    is refused once what was read passes the budget, not read to its end."""
    import io

    from workbench.util import safe_load

    monkeypatch.setattr(size_guard, "_OVERRIDE", 64e6)  # 64 MB: 2.1 MB of JSON at 30 B per byte
    grown = io.BytesIO(b"[" + b"0," * (3 << 20))
    with pytest.raises(InputError, match="grew while it was read"):
        safe_load._read_guarded(grown, 21, tmp_path / "growing.json", size_guard.BYTES_PER_PARSED_BYTE, InputError)
    assert grown.tell() < len(grown.getvalue())  # stopped before the end
    small = io.BytesIO(b"[" + b"0," * 1000)
    assert len(safe_load._read_guarded(small, 21, tmp_path / "s.json", 30, InputError)) == 2001


@pytest.mark.parametrize("per_byte", [size_guard.BYTES_PER_PARSED_BYTE, size_guard.BYTES_PER_YAML_BYTE])
@pytest.mark.parametrize("over", [False, True])
def test_the_refusal_is_the_length_times_the_bytes_per_byte(tmp_path, monkeypatch, per_byte, over):
    budget = 1e6
    monkeypatch.setattr(size_guard, "_OVERRIDE", budget)
    length = int(budget // per_byte) + (1 if over else 0)
    target = _sparse(tmp_path / "a.txt", length)
    if over:
        with pytest.raises(InputError, match="budget"):
            read_input(target, per_byte=per_byte)
    else:
        assert len(read_input(target, per_byte=per_byte)) == length


def test_a_refused_file_is_not_opened(tmp_path, monkeypatch):
    """The length is read from the name first: a file over the guard is never opened."""
    monkeypatch.setattr(size_guard, "_OVERRIDE", 1e6)
    big_file = _sparse(tmp_path / "big.json", 10**6)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    with pytest.raises(InputError):
        read_bytes(big_file)
    assert opened == []
    assert json.loads(read_bytes(_sparse(tmp_path / "small.json", 2, b"{}"))) == {}
