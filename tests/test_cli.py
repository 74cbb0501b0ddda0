import json
import subprocess
import sys

import pytest

from workbench.cli import main
from workbench.kit.examples import ring_allgather, ring_allreduce
from workbench.checking.simulate import simulate
from workbench.topology import build


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ar_file(tmp_path):
    path = tmp_path / "ar.json"
    ring_allreduce(4, 1e6, build("uniring:4")).save(path)
    return path


def test_topology_describe(capsys):
    code, out, _ = run(capsys, "topology", "rfs:2x4x2", "--bandwidth", "200GB/s,100GB/s,50GB/s", "--alpha", "0.5us")
    assert code == 0 and "npus       16" in out and "switches   8" in out


def test_topology_json_and_file(capsys, tmp_path):
    code, out, _ = run(capsys, "topology", "ring:3", "--json")
    assert code == 0 and len(json.loads(out)["links"]) == 6
    target = tmp_path / "t.yaml"
    assert run(capsys, "topology", "ring:3", "-o", str(target))[0] == 0
    code, out, _ = run(capsys, "topology", str(target))
    assert code == 0 and "links      6" in out


def test_verify_valid_and_invalid(capsys, ar_file, tmp_path):
    code, out, _ = run(capsys, "verify", str(ar_file))
    assert code == 0 and "valid" in out
    data = json.loads(ar_file.read_text())
    data["transfers"] = data["transfers"][:-1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(capsys, "verify", str(bad))
    assert code == 1 and "postcondition" in err


def test_simulate_json(capsys, ar_file):
    code, out, _ = run(capsys, "simulate", str(ar_file), "--json")
    data = json.loads(out)
    expected = simulate(ring_allreduce(4, 1e6, build("uniring:4")))
    assert code == 0
    assert data["collective_time"] == pytest.approx(expected.collective_time)
    assert data["algbw"] == pytest.approx(expected.algbw / 1e9)
    assert data["busbw"] == pytest.approx(expected.busbw / 1e9)
    assert 0 < data["efficiency"] <= 1


def test_simulate_options(capsys, ar_file):
    code, out, _ = run(capsys, "simulate", str(ar_file), "--json", "--link-model", "blocking", "--order", "fifo",
                       "--switch-model", "store-and-forward")
    assert code == 0 and json.loads(out)["link_model"] == "blocking"
    code, out, _ = run(capsys, "simulate", str(ar_file))
    assert code == 0 and "collective time" in out


def test_simulate_on_another_topology(capsys, tmp_path):
    path = tmp_path / "ag.json"
    ring_allgather(4, 1e6, build("ring:4")).save(path)
    code, out, _ = run(capsys, "simulate", str(path), "--json", "--topology", "ring:4", "--bandwidth", "10GB/s")
    assert code == 0 and json.loads(out)["collective_time"] == pytest.approx(3 * (0.5e-6 + 1e-4))


@pytest.mark.parametrize("argv, fragment", [
    (["topology", "blob:3"], "unknown topology spec 'blob:3'"),
    (["topology", "ring:4", "--bandwidth", "-5GB/s"], "bandwidth"),
    (["topology", "ring:4", "--alpha", "fastish"], "--alpha"),
    (["topology", "nothere.yaml"], "nothere.yaml: no such topology file"),
    (["verify", "missing.json"], "missing.json: no such algorithm file"),
    (["simulate", "{path}", "--order", "random"], "invalid choice"),
    (["verify", "{bad}"], "not valid JSON"),
    (["verify", "{nofield}"], "missing field 'transfers'"),
    (["frobnicate"], "invalid choice"),
    (["bounds", "--topology", "ring:4", "--collective", "allsum", "--size", "1MB"], "unknown collective"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, ar_file, argv, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    nofield = tmp_path / "nofield.json"
    nofield.write_text(json.dumps({"format": "workbench.algorithm/1", "topology": {}, "collective": {},
                                   "chunk_bytes": 1}))
    argv = [a.format(path=ar_file, bad=bad, nofield=nofield) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bounds_command(capsys):
    code, out, _ = run(capsys, "bounds", "--topology", "mesh:5x5", "--bandwidth", "50GiB/s", "--collective",
                       "allgather", "--size", "1GiB", "--json")
    data = json.loads(out)
    assert code == 0 and data["ideal"] == pytest.approx(9604e-6, rel=1e-6)
    assert data["best"] <= data["ideal"] * 1.01


def test_python_dash_m_entry_point(ar_file):
    proc = subprocess.run([sys.executable, "-m", "workbench", "verify", str(ar_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "workbench", "topology", "nope:1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
