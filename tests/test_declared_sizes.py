"""What files and arguments declare: the size guard reads it before anything is built (exit 2, one
line naming the field), the interpreters check every index a file names (exit 1, ``FAILED``), and
claimed times are finite, at least 0 and in order (exit 2 naming the transfer), on both readers."""

from __future__ import annotations

import json
import math
import re
import resource

import pytest
from hypothesis import assume, given, settings, strategies as st

from guards import deadline
from workbench.util import size_guard
from workbench.model.algorithm import AlgorithmFormatError, load_algorithm
from workbench.model.algorithm_io import TYPED_FROM_BYTES
from workbench.cli import main
from workbench.kit.examples import ring_allgather
from workbench.msccl import export_xml
from workbench.msccl.parse import parse_xml
from workbench.mscclpp import export_plan

BIG_XML = """<algo name="x" proto="Simple" nchannels="{nchannels}" nchunksperloop="{nchunks}" ngpus="{ngpus}"
 coll="allgather" inplace="0">
<gpu id="0" i_chunks="{i}" o_chunks="2" s_chunks="0"><tb id="0" send="1" recv="-1" chan="0">
<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="{cnt}" depid="-1" deps="-1" hasdep="0"/>
</tb></gpu>
<gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0"><tb id="0" send="-1" recv="0" chan="0"></tb></gpu>
</algo>
"""


def _xml(**declared: int) -> str:
    values = dict(nchannels=1, nchunks=2, ngpus=2, i=1, cnt=1)
    values.update(declared)
    return BIG_XML.format(**values)


def _refused_fast(argv: list[str], capsys, fragment: str, code: int = 2) -> str:
    """Run the command; it must exit with ``code``, print one line naming ``fragment``, and leave the
    process's peak memory where it was, under a hang guard (how fast on a quiet machine is
    ``benchmarks/hostile_probe.py``'s to measure, not a test's to assert)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux
    with deadline(30.0):
        assert main(argv) == code
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # under 200 MB more
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0] and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------ the size guard reads declared sizes
@pytest.mark.parametrize("command", ["interpret", "import"])
def test_two_billion_declared_gpus_are_refused_before_anything_is_built(tmp_path, capsys, command):
    path = tmp_path / "big.xml"
    path.write_text(_xml(ngpus=2_000_000_000))
    assert path.stat().st_size < 4096
    argv = ["interpret", str(path)] if command == "interpret" else \
        ["import", str(path), "--topology", "ring:2", "--size", "1MB", "-o", str(tmp_path / "a.json")]
    line = _refused_fast(argv, capsys, "ngpus=2000000000")
    assert "big.xml" in line and "needs an estimated" in line and "budget" in line
    assert not (tmp_path / "a.json").exists()


def test_a_huge_nchunksperloop_is_refused(tmp_path, capsys):
    path = tmp_path / "chunks.xml"
    path.write_text(_xml(nchunks=10**12))
    _refused_fast(["interpret", str(path)], capsys, "nchunksperloop=1000000000000")


# the least a declared value costs per unit in the guard's estimate (one part of several)
_PER_UNIT = {"nchunks": 3 * size_guard.BYTES_PER_SLOT / 2, "nchannels": 2 * size_guard.BYTES_PER_ELEMENT,
             "i": size_guard.BYTES_PER_SLOT, "cnt": size_guard.BYTES_PER_ACCESS}
_NAMED = {"ngpus": "ngpus=", "nchunks": "nchunksperloop=", "nchannels": "nchannels=", "i": "i_chunks=",
          "cnt": "cnt="}


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(sorted(_NAMED)), value=st.integers(1, 10**40), budget=st.integers(10**6, 10**10))
def test_any_declared_size_over_the_budget_is_refused_naming_its_field(field, value, budget):
    lowest = size_guard.BYTES_PER_SLOT * value * (1 + value) if field == "ngpus" else _PER_UNIT[field] * value
    assume(lowest > 2 * budget)  # over the budget, and the largest part of the estimate
    size_guard.set_budget(budget)
    try:
        with pytest.raises(size_guard.SizeError, match=re.escape(f"{_NAMED[field]}{size_guard.shown(value)}")):
            parse_xml(_xml(**{field: value}), "drawn.xml")
    finally:
        size_guard.set_budget(None)


def test_bounds_refuses_a_hundred_million_chunks_at_once(capsys):
    _refused_fast(["bounds", "--topology", "ring:8", "--collective", "allgather", "--size", "1GB",
                   "--chunks", "100000000"], capsys, "--chunks 100000000 on ring:8: needs an estimated")


def test_ten_million_repeats_are_refused_before_any_cell(tmp_path, capsys):
    config = tmp_path / "many.yaml"
    config.write_text("name: many\nrepeats: 10000000\ngrid:\n  topologies: ['ring:4']\n  collectives: [allgather]\n"
                      "  sizes: [1MB]\n  formulations: [ring]\n")
    out = tmp_path / "run"
    line = _refused_fast(["run", str(config), "--out", str(out)], capsys, "repeats")
    assert "10,000,000" in line and "cap" in line
    assert not out.exists()  # no folder, no cell


def test_a_grid_past_the_cell_cap_names_its_largest_key(tmp_path, capsys):
    sizes = ", ".join(f"{i}MB" for i in range(1, 1001))
    config = tmp_path / "grid.yaml"
    config.write_text(f"name: grid\nrepeats: 2000\ngrid:\n  topologies: ['ring:4']\n  collectives: [allgather]\n"
                      f"  sizes: [{sizes}]\n  formulations: [ring]\n")
    line = _refused_fast(["run", str(config), "--out", str(tmp_path / "run")], capsys, "grid.yaml: repeats:")
    assert "2,000,000 cells" in line


@settings(max_examples=15, deadline=None)
@given(repeats=st.integers(1, 10**4), sizes=st.integers(1, 300), chunks=st.integers(1, 400))
def test_the_cell_count_is_the_grid_s_and_past_the_cap_is_refused(repeats, sizes, chunks):
    from workbench.config.experiment import ConfigError, parse_experiment

    data = {"name": "g", "repeats": repeats, "grid": {"topologies": ["ring:4"], "collectives": ["allgather"],
                                                     "sizes": [f"{i + 1}KB" for i in range(sizes)],
                                                     "chunks": list(range(1, chunks + 1)), "formulations": ["ring"]}}
    cells = repeats * sizes * chunks
    if cells > size_guard.MAX_CELLS:
        key = max((("repeats", repeats), ("grid.sizes", sizes), ("grid.chunks", chunks)), key=lambda kv: kv[1])[0]
        with pytest.raises(ConfigError, match=rf"g.yaml: {re.escape(key)}: the grid has {cells:,} cells, over the cap"):
            parse_experiment(data, "g.yaml")
    else:
        assume(cells <= 2000)  # listing the cells is the slow part: small grids only
        assert len(parse_experiment(data, "g.yaml").cells()) == cells


def test_a_demand_entry_of_a_billion_chunks_is_refused(tmp_path, capsys):
    demand = tmp_path / "demand.yaml"
    demand.write_text("matrix:\n  - [0, 1000000000]\n  - [1, 0]\n")
    _refused_fast(["synth", "ring", "--topology", "ring:2", "--demand", str(demand), "--size", "1MB",
                   "-o", str(tmp_path / "a.json")], capsys, "matrix[0][1]=1000000000")


def test_a_hundred_million_instances_are_refused(tmp_path, capsys):
    source = tmp_path / "ring.json"
    ring_allgather(4, 1e6).save(source)
    _refused_fast(["export", str(source), "--instances", "100000000", "-o", str(tmp_path / "a.xml")], capsys,
                  "--instances 100000000: needs an estimated")
    assert not (tmp_path / "a.xml").exists()


def test_schedules_times_steps_is_capped(tmp_path, capsys):
    path = tmp_path / "ring.xml"
    path.write_text(export_xml(ring_allgather(4, 1e6)))
    _refused_fast(["interpret", str(path), "--schedules", "1000000000"], capsys, "--schedules 1,000,000,000 x")
    assert main(["interpret", str(path), "--schedules", "2"]) == 0


# ------------------------------------------------------------------ every index a file names exists
def _ring_xml() -> str:
    return export_xml(ring_allgather(4, 1e6))


def _first_receive(text: str, dstoff: int, cnt: int = 1) -> str:
    pattern = r'(type="r" srcbuf="\w" srcoff="\d+" dstbuf="\w" dstoff=")\d+" cnt="1"'
    edited = re.sub(pattern, rf'\g<1>{dstoff}" cnt="{cnt}"', text, count=1)
    assert edited != text
    return edited


XML_EDITS = {
    "a channel past nchannels": (lambda t: t.replace('chan="0"', 'chan="99999999"', 1),
                                 "chan=99999999 is not a channel (the file declares nchannels=1)"),
    "a peer out of range": (lambda t: t.replace('send="1"', 'send="7"', 1), "send=7 is not a rank (0..3"),
    "a buffer offset out of range": (lambda t: _first_receive(t, 4000), "o[4000] is outside the buffer (o_chunks=4)"),
    # named before the race analysis would list five million slots
    "a count past the buffer": (lambda t: _first_receive(t, 2, 5_000_000),
                                "o[2]..o[5000001] is outside the buffer (o_chunks=4)"),
    "an output of the wrong size": (lambda t: t.replace('o_chunks="4"', 'o_chunks="3"', 1),
                                    "o_chunks=3, but the allgather of nchunksperloop=4 over 4 GPUs places its "
                                    "chunks in 4"),
    "a dependency on no threadblock": (lambda t: t.replace('depid="0" deps="0"', 'depid="9" deps="0"', 1),
                                       "depid=9 names no threadblock of rank 0"),
    "a dependency on no step": (lambda t: t.replace('depid="0" deps="0"', 'depid="0" deps="5"', 1),
                                "deps=5 names no step of tb 0 (it has 1)"),
}


@pytest.mark.parametrize("case", sorted(XML_EDITS))
def test_the_xml_interpreter_names_an_index_that_does_not_exist(tmp_path, capsys, case):
    edit, message = XML_EDITS[case]
    path = tmp_path / "bad.xml"
    path.write_text(edit(_ring_xml()))
    line = _refused_fast(["interpret", str(path)], capsys, message, code=1)
    assert line.startswith(f"FAILED {path}: ")


def _plan() -> dict:
    return export_plan(ring_allgather(4, 1e6))


def _first_put(plan: dict) -> dict:
    return next(op for op in plan["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "put")


def _set(mapping: dict, key: str, value) -> None:
    mapping[key] = value


PLAN_EDITS = {
    "a put on a channel that does not exist": (lambda p: _set(_first_put(p), "channel_ids", [5]),
                                               "(put): channel 5 of type 'memory' is not a channel of the threadblock"),
    "a put into a buffer counted from the end": (lambda p: _set(_first_put(p)["dst_buff"][0], "buffer_id", -1),
                                                 "buffer_id -1 names no remote buffer"),
    "a put past the peer's buffer": (lambda p: _set(_first_put(p)["dst_buff"][0], "index", 4),
                                     "gpu 1 o[4] of size 1 is outside the buffer (output_chunks=4)"),
    "an output of the wrong size": (lambda p: _set(p["gpus"][1], "output_chunks", 5),
                                    "gpu 1: output_chunks=5, but the allgather over 4 GPUs"),
    "a remote buffer on no gpu": (lambda p: _set(p["gpus"][0]["remote_buffers"][0], "rank", 40),
                                  "remote_buffers[0].rank=40 is not another gpu"),
}


@pytest.mark.parametrize("case", sorted(PLAN_EDITS))
def test_the_plan_interpreter_names_an_index_that_does_not_exist(tmp_path, capsys, case):
    edit, message = PLAN_EDITS[case]
    plan = _plan()
    edit(plan)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(plan))
    _refused_fast(["interpret", str(path)], capsys, message, code=1)


def test_exported_files_still_pass(tmp_path, capsys):
    source = tmp_path / "ring.json"
    ring_allgather(4, 1e6, chunks_per_rank=2).save(source)
    for name, extra in (("a.xml", []), ("b.xml", ["--instances", "2"]), ("c.json", ["--format", "mscclpp"])):
        assert main(["export", str(source), *extra, "-o", str(tmp_path / name)]) == 0
        assert main(["interpret", str(tmp_path / name)]) == 0
    capsys.readouterr()


# ------------------------------------------------------------------ claimed times
def _with_times(path, count: int, bad_index: int, start: float, end: float) -> None:
    algorithm = ring_allgather(count, 1e6)
    for i, t in enumerate(algorithm.transfers):
        t.t_start, t.t_end = i * 1e-6, (i + 1) * 1e-6
    document = algorithm.to_dict()
    document["transfers"][bad_index].update(t_start=start, t_end=end)
    path.write_text(json.dumps(document))  # NaN and infinities as json writes them


@pytest.mark.parametrize("start, end, message", [
    (math.nan, 1.0, "t_start=nan; a claimed time must be finite and at least 0"),
    (-1.0, 1.0, "t_start=-1.0; a claimed time must be finite and at least 0"),
    (0.0, math.inf, "t_end=inf; a claimed time must be finite and at least 0"),
    (2.0, 1.0, "transfer 3 claims t_end=1.0 before t_start=2.0"),
])
@pytest.mark.parametrize("command", ["simulate", "verify"])
def test_bad_claimed_times_are_refused_naming_the_transfer(tmp_path, capsys, start, end, message, command):
    path = tmp_path / "a.json"
    _with_times(path, 4, 3, start, end)
    line = _refused_fast([command, str(path)], capsys, message)
    assert "transfers[3]" in line


def test_the_fast_reader_refuses_reversed_times_too(tmp_path, capsys):
    from workbench.model.typed_load import decode

    path = tmp_path / "big.json"
    _with_times(path, 110, 5000, 2.0, 1.0)  # 11,990 transfers
    assert path.stat().st_size >= TYPED_FROM_BYTES
    assert decode(path.read_bytes()) is None  # the typed reader hands it back, the usual one names it
    with pytest.raises(AlgorithmFormatError, match=r"transfers\[5000\]: transfer 5000 claims t_end=1.0 before"):
        load_algorithm(path)
    assert main(["simulate", str(path)]) == 2
    assert "transfer 5000 claims t_end=1.0" in capsys.readouterr().err
    _with_times(path, 110, 5000, 1.0, 2.0)
    assert decode(path.read_bytes()) is not None  # a good file still takes the fast way
    negative = json.loads(path.read_text())
    negative["transfers"][7]["t_end"] = -0.5
    path.write_text(json.dumps(negative))
    assert decode(path.read_bytes()) is None
    with pytest.raises(AlgorithmFormatError, match=r"transfers\[7\]\.t_end: transfer 7 claims t_end=-0.5"):
        load_algorithm(path)
