"""MSCCL XML: export -> interpret -> import round trips, negative cases, limits, CLI."""

import xml.etree.ElementTree as ET

import pytest

from workbench.plugin import call
from workbench.model.algorithm import Algorithm
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.msccl import MscclError, export_xml, import_xml, interpret
from workbench.plugin.registry import Problem, get_formulation
from workbench.checking.simulate import simulate
from workbench.topology import build
from workbench.checking.verify import verify
from formulations.sccl.race import cpsat_available

SIZE = 1e8
# SCCL's engine here: CP-SAT, or z3-auto without OR-Tools (the optional cpsat extra); the export is what is tested
SCCL_ENGINE = "cpsat" if cpsat_available() else "z3-auto"
# TACOS sends a chunk only to ranks that need it, so it cannot relay All-to-All pieces (the paper does
# not support All-to-All); the shortest-path trees do, and SCCL's All-to-All is tested below.
CASES = [(name, kind) for name in ("tacos", "ring", "direct", "rhd", "hierarchical")
         for kind in ("allgather", "reducescatter", "allreduce")] + [("dbt", "allreduce"), ("bfs-trees", "alltoall")]


def synthesize(name, spec, kind, k=1, **params):
    topology = build(spec)
    result = call.synthesize(get_formulation(name), Problem(topology, make_collective(kind, topology.num_npus, k), SIZE),
                                              time_limit=30, seed=0, **params)
    assert result.algorithms, result.message
    return topology, result.algorithms[0]


@pytest.mark.parametrize("spec", ["ring:8", "dgx1", "rfs:2x4x2"])
@pytest.mark.parametrize("name, kind", CASES)
def test_round_trip(spec, name, kind):
    if name == "hierarchical" and spec == "dgx1":
        pytest.skip("hierarchical needs a topology built from dimensions")
    topology, algorithm = synthesize(name, spec, kind)
    try:
        text = export_xml(algorithm, fuse=False)
        fused = export_xml(algorithm)
    except MscclError as exc:  # the only accepted refusal: a named runtime limit
        assert "MSCCL_MAX" in str(exc)
        return
    interpret(text)
    imported = import_xml(text, topology, SIZE)
    verify(imported)
    split = len(imported.transfers) != len(algorithm.transfers)  # non-contiguous messages became runs
    if not split:
        assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)
    interpret(fused)  # receive-and-forward fused into rcs/rrcs steps: still correct, not the same timing
    verify(import_xml(fused, topology, SIZE))


@pytest.mark.parametrize("kind, k, steps, rounds", [("allgather", 2, 2, 3), ("alltoall", 1, 2, 3),
                                                  ("allreduce", 1, 2, 2)])
def test_sccl_round_trip(kind, k, steps, rounds):
    topology = build("dgx1")
    problem = Problem(topology, make_collective(kind, 8, k), SIZE)
    algorithm = call.synthesize(get_formulation("sccl"), problem, time_limit=60, seed=0, steps=steps, rounds=rounds,
                                                   backend=SCCL_ENGINE).algorithms[0]
    text = export_xml(algorithm, fuse=False)
    interpret(text)
    imported = import_xml(text, topology, SIZE)
    assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)


def test_tacos_all_to_all_on_a_fully_connected_topology():
    topology, algorithm = synthesize("tacos", "fc:6", "alltoall")
    text = export_xml(algorithm, fuse=False)
    imported = import_xml(text, topology, SIZE)
    assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)


def test_instances_split_chunks_over_channels():
    topology, algorithm = synthesize("ring", "ring:4", "allreduce", bidirectional=False)
    text = export_xml(algorithm, instances=2, proto="LL128", max_bytes=2**20)
    assert 'nchannels="2"' in text and 'proto="LL128"' in text and 'maxBytes="1048576"' in text
    interpret(text)
    imported = import_xml(text, topology, SIZE)
    assert imported.collective.chunks_per_rank == 2
    verify(imported)


def test_required_attributes_present():
    _, algorithm = synthesize("ring", "ring:4", "allgather")
    text = export_xml(algorithm)
    for attribute in ("outofplace", "minBytes", "maxBytes", "nchunksperloop", "nchannels", "proto", "inplace"):
        assert f'{attribute}="' in text
    assert 'coll="allgather"' in text and "wbid=" in text


def test_switch_endpoint_is_rejected():
    topology = build("switch:3")
    collective = make_collective("broadcast", 3, 1, 0)
    algorithm = Algorithm.from_steps(topology, collective, 1e6, [(0, 0, 3, "copy", ()), (0, 3, 1, "copy", (0,)),
                                                                   (0, 3, 2, "copy", (0,))])
    with pytest.raises(MscclError, match="node 3 is a switch; MSCCL addresses GPUs only"):
        export_xml(algorithm)


def test_runtime_limit_is_named():
    _, algorithm = synthesize("ring", "uniring:260", "allgather", bidirectional=False)
    with pytest.raises(MscclError, match="MSCCL_MAX_NUM_STEPS = 256"):
        export_xml(algorithm)


def _ring_xml():
    _, algorithm = synthesize("ring", "uniring:4", "allgather", bidirectional=False)
    return export_xml(algorithm, fuse=False)


def test_ring_receive_and_forward_are_fused():
    topology, algorithm = synthesize("ring", "uniring:4", "allreduce", bidirectional=False)
    text = export_xml(algorithm)
    assert 'type="rcs"' in text and 'type="rrcs"' in text
    root = ET.fromstring(text)
    for gpu in root.findall("gpu"):  # one threadblock receives from r-1 and sends to r+1
        assert any(tb.get("send") != "-1" and tb.get("recv") != "-1" for tb in gpu.findall("tb"))
    interpret(text)
    verify(import_xml(text, topology, SIZE))


def _edit(text, rank, predicate, change):
    """Apply ``change`` to the first step of ``rank`` whose threadblock matches ``predicate``."""
    root = ET.fromstring(text)
    gpu = next(g for g in root.findall("gpu") if g.get("id") == str(rank))
    tb = next(t for t in gpu.findall("tb") if predicate(t))
    change(tb)
    return ET.tostring(root, encoding="unicode")


def test_mismatched_send_receive():
    def silence_last_receive(tb):  # the last chunk a rank receives is not forwarded
        tb.findall("step")[-1].set("type", "nop")
    text = _edit(_ring_xml(), 1, lambda tb: tb.get("recv") != "-1", silence_last_receive)
    with pytest.raises(MscclError, match=r"mismatch: rank 0 tb \d+ step 2 sends to rank 1 .* no receive takes it"):
        interpret(text)


def test_dependency_cycle_deadlocks():
    def first_waits_on_second(tb):
        steps = tb.findall("step")
        steps[0].set("depid", tb.get("id"))
        steps[0].set("deps", "1")
    text = _edit(_ring_xml(), 0, lambda tb: tb.get("send") != "-1", first_waits_on_second)
    with pytest.raises(MscclError, match=r"deadlock: .*rank 0 tb \d+ step 0 \(s\) waits on tb \d+ step 1"):
        interpret(text)


def test_missing_step():
    def drop_last(tb):
        tb.remove(tb.findall("step")[-1])
    text = _edit(_ring_xml(), 1, lambda tb: tb.get("send") != "-1", drop_last)
    with pytest.raises(MscclError, match=r"deadlock: .*rank 2 tb \d+ step \d+ \(r\) waits for a message from rank 1"):
        interpret(text)


def test_postcondition_failure_is_reported():
    text = _ring_xml().replace('coll="allgather"', 'coll="allreduce"')
    with pytest.raises(MscclError):
        interpret(text)


def test_cli_export_interpret_import(tmp_path, capsys):
    topology, algorithm = synthesize("tacos", "dgx1", "allreduce")
    source = tmp_path / "ar.json"
    algorithm.save(source)
    xml = tmp_path / "ar.xml"
    assert main(["export", str(source), "--format", "msccl-xml", "-o", str(xml)]) == 0
    assert "postcondition" in capsys.readouterr().out
    assert main(["interpret", str(xml)]) == 0
    back = tmp_path / "back.json"
    assert main(["import", str(xml), "--topology", "dgx1", "--size", "100MB", "-o", str(back)]) == 0
    assert main(["verify", str(back)]) == 0
    bad = tmp_path / "bad.xml"
    bad.write_text("<algo><gpu")
    capsys.readouterr()
    assert main(["interpret", str(bad)]) == 2  # not a runtime file at all: bad input, as import says
    assert main(["import", str(bad), "--topology", "dgx1", "--size", "1MB", "-o", str(tmp_path / "x.json")]) == 2
    assert "not well-formed" in capsys.readouterr().err
    assert main(["export", str(source), "--format", "svg", "-o", str(xml)]) == 2
