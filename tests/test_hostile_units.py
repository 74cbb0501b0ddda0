"""Odd values at the edges: bits are not bytes, a spelling that could be either is refused, values
out of range are refused before they overflow, ``bounds --size 0`` and a bad SyCCL ``depths`` are
bad input (one line, exit 2), and no file the workbench writes holds ``NaN`` or ``Infinity``."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from workbench.cli import main
from workbench.util.units import UnitError, parse_bandwidth, parse_size, parse_time

BOUNDS = ["bounds", "--topology", "ring:4", "--collective", "allgather"]


def _one_line(capsys, *expected: str) -> str:
    """The one stderr line of a refusal, holding every ``expected`` text and no traceback."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for text in expected:
        assert text in err[0], (text, err)
    return err[0]


def _strict(text: str):
    """JSON as a strict parser reads it: ``NaN``, ``Infinity`` and ``-Infinity`` are errors."""
    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------- bits and bytes
@pytest.mark.parametrize("bits, nbytes", [
    ("5Gb/s", 5e9), ("5Gbps", 5e9), ("5Gbit/s", 5e9), ("5Gbits/s", 5e9), ("400 Gb/s", 400e9),
    ("5Mb/s", 5e6), ("5Kb/s", 5e3), ("5kbit/s", 5e3), ("5Tb/s", 5e12), ("5Gib/s", 5 * 2**30), ("8bit/s", 8.0),
])
def test_a_rate_in_bits_is_an_eighth_of_the_bytes(bits, nbytes):
    assert parse_bandwidth(bits) == pytest.approx(nbytes / 8, rel=1e-15)


@pytest.mark.parametrize("text, nbytes", [
    ("5GB/s", 5e9), ("5GBps", 5e9), ("5GiB/s", 5 * 2**30), ("5kB/s", 5e3), ("5KB/s", 5e3), ("5GB/sec", 5e9),
    ("5G/s", 5e9), ("50B/s", 50.0),
])
def test_a_rate_in_bytes_is_taken_as_written(text, nbytes):
    assert parse_bandwidth(text) == nbytes


_FACTORS = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10, "Mi": 2.0**20,
            "Gi": 2.0**30, "Ti": 2.0**40}


@given(st.floats(1.0, 1e6, allow_nan=False), st.sampled_from(sorted(_FACTORS)), st.sampled_from(["/s", "ps"]))
def test_any_bit_rate_is_the_byte_rate_over_8(number, prefix, per):
    assume(1.0 <= number * _FACTORS[prefix] / 8 and number * _FACTORS[prefix] <= 1e18)  # both within the range
    nbytes = parse_bandwidth(f"{number!r}{prefix}B{per}")
    bits = "bit/s" if prefix in ("", "k") else f"b{per}"  # a lower-case b needs an upper-case prefix
    assert parse_bandwidth(f"{number!r}{prefix}{bits}") == pytest.approx(nbytes / 8, rel=1e-15)


def test_bits_on_the_command_line_are_converted(capsys):
    assert main([*BOUNDS, "--size", "1MB", "--bandwidth", "400Gb/s", "--json"]) == 0
    bits = json.loads(capsys.readouterr().out)
    assert main([*BOUNDS, "--size", "1MB", "--bandwidth", "50GB/s", "--json"]) == 0
    assert bits == json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- ambiguous spellings
@pytest.mark.parametrize("text, write", [
    ("5gb/s", "'5GB/s'"), ("5gbps", "'5Gbit/s'"), ("5kb/s", "'5KB/s'"), ("5mbps", "'5MB/s'"), ("5b/s", "'5bit/s'"),
    ("5gib/s", "'5GiB/s'"),
])
def test_an_all_lower_case_rate_is_ambiguous_and_says_how_to_write_it(text, write):
    with pytest.raises(UnitError, match="ambiguous") as info:
        parse_bandwidth(text)
    assert repr(text) in str(info.value) and write in str(info.value)


@pytest.mark.parametrize("text", ["1gb", "64kb", "1mb", "100b", "1gib"])
def test_an_all_lower_case_size_is_ambiguous(text):
    with pytest.raises(UnitError, match="ambiguous"):
        parse_size(text)


@pytest.mark.parametrize("text", ["1Gb", "64Kb", "1Mbit", "2Gib"])
def test_a_size_in_bits_is_refused(text):
    with pytest.raises(UnitError, match="bits") as info:
        parse_size(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("option, value, expected", [
    ("--bandwidth", "5gb/s", "ambiguous"), ("--bandwidth", "5gbps", "ambiguous"),
    ("--size", "1Gb", "bits"), ("--size", "1gb", "ambiguous"),
])
def test_ambiguous_or_bit_values_at_the_command_line_are_one_line(capsys, option, value, expected):
    argv = [*BOUNDS, "--size", "1MB", option, value] if option != "--size" else [*BOUNDS, option, value]
    assert main(argv) == 2
    _one_line(capsys, option, expected, value)


# ---------------------------------------------------------------- ranges
@pytest.mark.parametrize("func, text", [
    (parse_bandwidth, "1e-300"), (parse_bandwidth, "1e308"), (parse_bandwidth, "0.5"), (parse_bandwidth, "2e18"),
    (parse_bandwidth, "1e-300GB/s"), (parse_bandwidth, "1e308TB/s"), (parse_bandwidth, 1e-300),
    (parse_time, "1e-300"), (parse_time, "1e300"), (parse_time, "1e10s"), (parse_time, "1e308h"), (parse_time, 1e-20),
    (parse_size, "1e-300"), (parse_size, "1e19"), (parse_size, "0.5"), (parse_size, "1e308GiB"), (parse_size, 10**30),
])
def test_values_out_of_range_are_refused(func, text):
    with pytest.raises(UnitError, match="out of range") as info:
        func(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("func, text, value", [
    (parse_bandwidth, "1", 1.0), (parse_bandwidth, "1e18", 1e18), (parse_bandwidth, 0, 0.0),
    (parse_time, "0", 0.0), (parse_time, 0.0, 0.0), (parse_time, "1e-15", 1e-15), (parse_time, "1e9", 1e9),
    (parse_time, "0.001ps", 1e-15), (parse_size, "1", 1.0), (parse_size, "1e18", 1e18), (parse_size, "0", 0.0),
])
def test_the_ends_of_the_ranges_and_zero_pass(func, text, value):
    assert func(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("option, value", [
    ("--bandwidth", "1e-300"), ("--bandwidth", "1e308"), ("--alpha", "1e300"), ("--alpha", "1e-300"),
    ("--overhead", "1e12s"), ("--size", "1e19"),
])
def test_out_of_range_options_are_one_line_and_exit_2(capsys, option, value):
    argv = [*BOUNDS, option, value] + (["--size", "1MB"] if option != "--size" else [])
    assert main(argv) == 2
    _one_line(capsys, option, value, "out of range")


def test_a_zero_alpha_still_works(capsys):
    assert main([*BOUNDS, "--size", "1MB", "--alpha", "0", "--json"]) == 0
    assert _strict(capsys.readouterr().out)["latency"] < 1e-20  # no alpha: a path costs (next to) nothing


# ---------------------------------------------------------------- bounds --size 0
@pytest.mark.parametrize("size, expected", [("0", "must be positive"), ("0KB", "must be positive"),
                                            ("-1MB", "negative")])
def test_bounds_refuses_a_size_that_is_not_positive(capsys, size, expected):
    assert main([*BOUNDS, f"--size={size}"]) == 2
    _one_line(capsys, "--size", expected)


# ---------------------------------------------------------------- syccl depths
@pytest.mark.parametrize("value", ["abc", "1,x", "0,2", "''", "0", "-1", "1.5", "2000000000", "'1,,2'", "[1, 2]"])
def test_a_bad_syccl_depths_is_refused_before_anything_runs(tmp_path, capsys, value):
    out = tmp_path / "out.json"
    argv = ["synth", "syccl", "--topology", "rails:2x4", "--collective", "allgather", "--size", "1MB",
            "--set", f"depths={value}", "-o", str(out)]
    assert main(argv) == 2
    _one_line(capsys, "depths")
    assert not out.exists()


@pytest.mark.parametrize("value", ["auto", "1,2", " 1 , 4 ", 8])
def test_good_syccl_depths_pass_the_check(value):
    from formulations.syccl import Syccl
    from workbench.plugin.parameters import check_parameters

    check_parameters(Syccl(), {"depths": value}, "--set", sep=" ")


def test_a_syccl_search_that_builds_nothing_is_an_error_not_a_timeout(tmp_path, capsys):
    out = tmp_path / "out.json"
    argv = ["synth", "syccl", "--topology", "rails:2x4", "--collective", "allgather", "--size", "1MB",
            "--set", "depths=999999", "-o", str(out)]
    assert main(argv) == 5
    captured = capsys.readouterr()
    assert "status            error" in captured.out
    assert "max_transfers" in captured.err and "timed out" not in captured.err


def test_an_exception_in_a_formulation_is_an_error_not_a_timeout():
    from workbench.config.evaluation import Evaluation
    from workbench.config.experiment import Cell
    from workbench.run.monitor import execute
    from workbench.run.request import CellRequest

    cell = Cell(experiment="x", topology={"spec": "rails:2x4", "label": "rails:2x4"},
                collective={"kind": "allgather"}, size_bytes=1e6, chunks=1,
                formulation={"name": "syccl", "label": "syccl", "params": {"depths": "1,x"}}, seed=0, time_limit=30.0,
                evaluation=Evaluation())
    fields = execute(CellRequest("schedule", cell))  # past the floor's check: the formulation raises
    assert fields["status"] == "error" and "depths" in fields["message"]


# ---------------------------------------------------------------- no NaN / Infinity in written files
def test_synth_with_extreme_accepted_values_writes_standard_json(tmp_path, capsys):
    out = tmp_path / "extreme.json"
    argv = ["synth", "ring", "--topology", "ring:4", "--collective", "allgather", "--size", "1e18",
            "--bandwidth", "1", "--alpha", "1e9", "-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    document = _strict(out.read_text())
    assert all(math.isfinite(t["t_end"]) for t in document["transfers"] if t.get("t_end") is not None)


def test_bounds_json_with_extreme_accepted_values_is_standard(capsys):
    assert main([*BOUNDS, "--size", "1e18", "--bandwidth", "1", "--alpha", "1e9", "--overhead", "1e9",
                 "--json"]) == 0
    data = _strict(capsys.readouterr().out)
    assert math.isfinite(data["best"]) and data["best"] > 1e17


@pytest.mark.parametrize("engine", ["orjson", "json"])
def test_an_infinity_in_meta_is_written_as_null(tmp_path, monkeypatch, engine):
    import numpy as np

    from workbench.kit.examples import ring_allreduce
    from workbench.model.algorithm import load_algorithm
    from workbench.util import fastjson

    if engine == "orjson" and fastjson._orjson is None:
        pytest.skip("orjson is not installed")
    monkeypatch.setattr(fastjson, "ENGINE", engine)
    algorithm = ring_allreduce(4, 1e6)
    algorithm.meta.update(gap=float("inf"), nested={"x": [float("nan"), np.float32("-inf"), 1.5]})
    algorithm.save(tmp_path / "a.json")
    meta = _strict((tmp_path / "a.json").read_text())["meta"]
    assert (meta["gap"], meta["nested"]) == (None, {"x": [None, None, 1.5]})
    assert load_algorithm(tmp_path / "a.json").meta["gap"] is None


def test_rows_are_written_as_standard_json_and_old_tokens_still_read(tmp_path):
    from workbench.reports.results import ResultStore

    store = ResultStore(tmp_path)
    store.append({"cell_id": "a", "efficiency": float("nan"), "stats": {"gap": float("inf"), "word": "NaN"}})
    (line,) = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert _strict(line) == {"cell_id": "a", "efficiency": None, "stats": {"gap": None, "word": "NaN"}}
    with open(tmp_path / "rows.jsonl", "a") as handle:  # a row as older versions wrote it
        handle.write('{"cell_id": "b", "efficiency": NaN, "bound": Infinity}\n')
    rows = ResultStore(tmp_path, read_only=True).rows()
    assert [r["cell_id"] for r in rows] == ["a", "b"] and math.isinf(rows[1]["bound"])
