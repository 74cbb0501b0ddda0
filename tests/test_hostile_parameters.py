"""Parameters and fields that scale the work are priced by the size guard before anything is built:
``--set`` and an experiment's ``params:`` (``price_parameters``), a periodic file written out as an
MSCCL++ plan (``period.repeat``); and the interpreters' race check grows with the accesses to a slot,
not with their pairs.

Every refusal is exit 2, one stderr line naming the parameter or field, before a cell starts or
anything expands, with nothing written. The budgets are small and given (``--max-memory``), the
values moderate, so a missing guard fails a test by its exit code within the cell's short time
limit instead of filling the machine. No test asserts a wall time (how fast a refusal is on a quiet
machine is measured by ``benchmarks/hostile_probe.py``): the busy-slot checks run under a hang
guard at sizes where the pairwise check they replaced takes minutes."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from guards import deadline
from workbench.plugin import call
from workbench.cli import main
from workbench.kit.examples import ring_allgather
from workbench.model.collective import make_collective
from workbench.model.periodic import repeated
from workbench.mscclpp import export_plan
from workbench.plugin.parameters import price_parameters
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build
from workbench.util import size_guard

SYNTH = ["--topology", "ring:4", "--size", "1MB", "--time-limit", "30s", "--max-memory", "20MB"]  # a real run gets time on a busy machine
HANG = 30.0  # seconds: a hang guard, far above any of these commands; not a speed target
# operations on one slot: the pairwise race check these replace took ~20 s at 20,000 and minutes at
# 50,000 (workbench.checking.happens_before), the single pass about a second
BUSY = 50_000


@pytest.fixture()
def no_cell(monkeypatch):
    """Fail the test if a cell (a synthesis) starts: the refusals below come before any."""
    import workbench.run.monitor
    import workbench.run.runner

    def started(*args, **kwargs):
        raise AssertionError("a cell started before the refusal")

    monkeypatch.setattr(workbench.run.monitor, "execute", started)
    monkeypatch.setattr(workbench.run.runner, "execute", started)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("name, kind, settings, named", [
    ("multipath", "alltoall", ["chunks=5000"], "--set chunks=5000"),
    ("forestcoll", "allgather", ["pieces=100000"], "--set pieces=100000"),
    ("teccl", "allgather", ["epochs=20000"], "--set epochs=20000"),
    ("sccl", "allgather", ["steps=5000", "rounds=5000"], "--set steps=5000"),
    ("syccl", "allgather", ["depths=1,100000", "max_transfers=100000000"], "--set depths=1,100000"),
])
def test_a_parameter_that_scales_the_work_is_refused_before_the_cell(name, kind, settings, named, tmp_path, capsys,
                                                                      no_cell):
    out = tmp_path / "out.json"
    argv = ["synth", name, *SYNTH, "--collective", kind, "-o", str(out)]
    for setting in settings:
        argv += ["--set", setting]
    with deadline(HANG):
        assert main(argv) == 2
    line = _one_line(capsys)
    assert f"{named}: needs an estimated" in line and "over the 20 MB budget" in line, line
    assert not out.exists()


def test_the_refusal_costs_no_memory(tmp_path, capsys):
    tracemalloc.start()
    try:
        assert main(["synth", "teccl", *SYNTH, "--collective", "allgather", "--set", "epochs=1000000",
                     "-o", str(tmp_path / "out.json")]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6  # the model of a million epochs (~34 GB) is priced, never built
    assert "--set epochs=1000000: needs an estimated 33.6 GB" in _one_line(capsys)


def test_an_experiment_param_is_refused_before_any_cell(tmp_path, capsys, no_cell):
    config = tmp_path / "hostile.yaml"
    config.write_text("name: hostile\ngrid:\n  topologies: [ring:4]\n  collectives: [alltoall]\n  sizes: [1MB]\n"
                      "  formulations:\n    - {name: multipath, params: {chunks: 5000}}\n")
    results = tmp_path / "results"
    with deadline(HANG):
        assert main(["run", str(config), "--results-dir", str(results), "--max-memory", "20MB"]) == 2
    line = _one_line(capsys)
    assert "hostile.yaml: grid.formulations[0].params.chunks=5000: needs an estimated" in line, line
    assert not results.exists()


def test_sensible_values_are_not_refused(tmp_path, capsys):
    topology = build("ring:4")
    small = size_guard.ProblemSize(4, topology.num_nodes, len(topology.links), "allgather", 1, 0.0, 1e6)
    for name, params in [("multipath", {"chunks": 16}), ("forestcoll", {"pieces": 64, "k": 2}),
                         ("teccl", {"epochs": 30, "threads": 2}), ("sccl", {"steps": 3, "rounds": 4}),
                         ("syccl", {"depths": "1,2,4"}), ("taccl", {"max_contig": 8})]:
        price_parameters(get_formulation(name), params, "--set", [small], sep=" ", limit=20e6)
    out = tmp_path / "out.json"
    assert main(["synth", "multipath", *SYNTH, "--collective", "alltoall", "--set", "chunks=2",
                 "-o", str(out)]) == 0
    assert out.exists()


def test_the_price_of_chunks_is_what_the_schedule_measures():
    """``chunks`` of multipath on ring:4 (a piece crosses 1.33 hops): the measured peak and the price
    agree within a factor of 1.5 either way."""
    topology = build("ring:4")
    problem = Problem(topology, make_collective("alltoall", 4, 1), 1e6)
    multipath = get_formulation("multipath")
    call.synthesize(multipath, problem, time_limit=30, seed=0, chunks=2)  # imports and first-use caches, untraced
    tracemalloc.start()
    try:
        call.synthesize(multipath, problem, time_limit=30, seed=0, chunks=256)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    priced = size_guard.ProblemSize(4, topology.num_nodes, len(topology.links), "alltoall").listed_bytes(256)
    assert peak / 1.5 < priced < 1.5 * peak, (peak, priced)


@pytest.fixture()
def periodic_file(tmp_path):
    path = tmp_path / "periodic.json"
    repeated(ring_allgather(2, 1e6), 4).save(path)
    document = json.loads(path.read_text())
    document["period"]["repeat"] = 5000  # 10,000 transfers written out: ~80 MB as a plan
    path.write_text(json.dumps(document))
    assert path.stat().st_size < 4000
    return path


def test_a_periodic_file_too_large_to_write_out_is_refused_before_it_expands(periodic_file, tmp_path, capsys):
    out = tmp_path / "plan.json"
    argv = ["export", str(periodic_file), "--format", "mscclpp", "-o", str(out), "--max-memory", "40MB"]
    tracemalloc.start()
    try:
        with deadline(HANG):
            assert main(argv) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10e6  # the 10,000 transfers written out (~80 MB as a plan) are priced, never expanded
    line = _one_line(capsys)
    assert "periodic.json: period.repeat=5000 (10,000 transfers written out): needs an estimated" in line, line
    assert not out.exists()


def test_the_plan_export_prices_the_expansion_for_any_caller(periodic_file):
    """``export_plan`` itself (``workbench tune`` lowers through it): an expansion over the budget
    does not lower, named, before anything is expanded."""
    from workbench.model.algorithm import load_algorithm
    from workbench.msccl import MscclError

    algorithm = load_algorithm(periodic_file)
    size_guard.set_budget(40e6)
    try:
        tracemalloc.start()
        with pytest.raises(MscclError, match=r"^p: period\.repeat=5000 .*needs an estimated"):
            export_plan(algorithm, source="p")
        assert tracemalloc.get_traced_memory()[1] < 1e6
    finally:
        tracemalloc.stop()
        size_guard.set_budget(None)


def test_msccl_xml_loops_one_period_and_is_not_refused(periodic_file, tmp_path, capsys):
    out = tmp_path / "loop.xml"
    assert main(["export", str(periodic_file), "-o", str(out), "--max-memory", "40MB"]) == 0
    assert 'nchunksperloop="2"' in out.read_text()


def _busy_plan(copies: int, racy: bool = False) -> str:
    """A 2-GPU All-Gather plan whose gpu 0 first copies its input slot into one scratch slot
    ``copies`` times: every copy reads i[0] and writes s[0]. ``racy``: a second threadblock writes
    s[0] too, ordered with nothing."""
    plan = export_plan(ring_allgather(2, 1e6, build("ring:2")))
    gpu = plan["gpus"][0]
    gpu["scratch_chunks"] = 1
    copy = {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
            "dst_buff": [{"type": "s", "index": 0, "size": 1}]}
    gpu["threadblocks"][0]["ops"][:0] = [copy] * copies
    if racy:
        gpu["threadblocks"].append({"id": 1, "ops": [copy], "channels": [], "remote_buffer_refs": []})
    return json.dumps(plan)


def test_a_plan_touching_one_slot_many_times_interprets_in_linear_time(tmp_path, capsys):
    path = tmp_path / "busy.json"
    path.write_text(_busy_plan(BUSY))
    with deadline(HANG):  # the pairwise check took minutes on this plan
        assert main(["interpret", str(path)]) == 0
    assert "no races" in capsys.readouterr().out


def test_a_race_on_a_busy_slot_is_still_found_and_named(tmp_path, capsys):
    path = tmp_path / "racy.json"
    path.write_text(_busy_plan(BUSY, racy=True))
    with deadline(HANG):
        assert main(["interpret", str(path)]) == 1
    err = capsys.readouterr().err
    assert "race on gpu 0 s[0]: gpu 0 tb 0 op" in err and "gpu 0 tb 1 op 0 (copy) writes it" in err, err


XML = """<algo name="busy" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0"
 outofplace="1" minBytes="0" maxBytes="0" redop="sum">
<gpu id="0" i_chunks="1" o_chunks="2" s_chunks="1">
<tb id="0" send="-1" recv="-1" chan="0">{copies}
<step s="{n}" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/></tb>
<tb id="1" send="1" recv="-1" chan="0">
<step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="{n}" hasdep="0"/></tb>
<tb id="2" send="-1" recv="1" chan="0">
<step s="0" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/></tb>
</gpu>
<gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
<tb id="0" send="-1" recv="-1" chan="0">
<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/></tb>
<tb id="1" send="-1" recv="0" chan="0">
<step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/></tb>
<tb id="2" send="0" recv="-1" chan="0">
<step s="0" type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="0" deps="0" hasdep="0"/></tb>
</gpu>
</algo>
"""


def test_an_xml_touching_one_slot_many_times_interprets_in_linear_time(tmp_path, capsys):
    n = BUSY
    copies = "".join(f'\n<step s="{i}" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" '
                     f'deps="-1" hasdep="0"/>' for i in range(n))
    path = tmp_path / "busy.xml"
    path.write_text(XML.format(copies=copies, n=n))
    with deadline(HANG):
        assert main(["interpret", str(path)]) == 0
    assert "no races" in capsys.readouterr().out


def test_forestcoll_prices_with_the_budgets_its_synthesis_uses():
    from formulations.forestcoll import options, synthesis

    assert (options.LISTING_BUDGET, options.PERIODIC_BUDGET, options.MAX_DEFAULT_PIECES, options.PERIODIC_FROM) == (
        synthesis._LISTING_BUDGET, synthesis.PERIODIC_BUDGET, synthesis._MAX_DEFAULT_PIECES, synthesis._PERIODIC_FROM)
