"""One-pass All-Reduce schedules (transfers that read earlier values) through the runtimes: exported as
MSCCL XML valid in place and out of place, interpreted race-free in both aliasings, imported back to
the same simulated time; MSCCL++ plans likewise."""

from __future__ import annotations

import json

import pytest

from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.cli import main
from workbench.model.collective import make_collective
from workbench.msccl import MscclError, export_xml, import_xml, interpret
from workbench.mscclpp import export_plan, interpret_plan
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build

SIZE = 1 << 20
CASES = [(name, spec) for name in ("oneshot", "oneshot-hier", "rd") for spec in ("ring:8", "dgx1", "ndv2:2")] + [
    ("rd", "ring:6"), ("rd", "ring:12"), ("oneshot", "ring:6"), pytest.param("rd", "rails:4x8", marks=pytest.mark.slow),
    pytest.param("oneshot", "rails:4x8", marks=pytest.mark.slow),
    pytest.param("oneshot-hier", "rails:4x8", marks=pytest.mark.slow)]


def _synth(name: str, spec: str, kind: str = "allreduce"):
    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus), SIZE)
    result = call.synthesize(get_formulation(name), problem, time_limit=30, seed=0)
    assert result.algorithms, result.message
    return topology, result.algorithms[0]


@pytest.mark.parametrize("name, spec", CASES)
def test_exports_interprets_in_both_aliasings_and_imports_to_the_same_time(name, spec):
    topology, algorithm = _synth(name, spec)
    assert any(t.read is not None for t in algorithm.transfers)
    text = export_xml(algorithm, fuse=False)
    assert 'inplace="1" outofplace="1"' in text
    report = interpret(text, schedules=1)
    assert report["aliasings"] == ["out of place", "in place"]
    imported = import_xml(text, topology, SIZE)
    verify(imported)
    assert len(imported.transfers) == len(algorithm.transfers)
    assert any(t.read is not None for t in imported.transfers)  # the kept copies became earlier-value reads
    assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)
    plan = json.dumps(export_plan(algorithm, gpus_per_node=8))
    assert interpret_plan(plan, aliasings=[False, True])["aliasings"] == ["out of place", "in place"]


def test_a_send_from_the_input_slot_is_correct_out_of_place_and_a_race_in_place():
    """A two-rank one-shot that sends i[0..1] while the peer's data is added into o[0..1]: correct out
    of place (two buffers), a race in place (o is i, and nothing orders the send before the add)."""
    gpus = []
    for rank in range(2):
        peer = 1 - rank
        gpus.append(f'''<gpu id="{rank}" i_chunks="2" o_chunks="2" s_chunks="0">
<tb id="0" send="-1" recv="-1" chan="0">
<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/></tb>
<tb id="1" send="{peer}" recv="-1" chan="0">
<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/></tb>
<tb id="2" send="-1" recv="{peer}" chan="0">
<step s="0" type="rrc" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="0" deps="0" hasdep="0"/></tb>
</gpu>''')
    text = ('<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" '
            'inplace="{}" outofplace="{}" minBytes="0" maxBytes="0">' + "".join(gpus) + "</algo>")
    assert interpret(text.format(0, 1))["aliasings"] == ["out of place"]
    with pytest.raises(MscclError, match=r"\(in place\): race on rank \d i\[[01]\]"):
        interpret(text.format(1, 1))


def test_mscclpp_in_place_all_to_all_is_refused_in_one_line(tmp_path, capsys):
    _, algorithm = _synth("direct", "ring:4", "alltoall")
    source = tmp_path / "a2a.json"
    algorithm.save(source)
    out = tmp_path / "plan.json"
    assert main(["export", str(source), "--format", "mscclpp", "--in-place", "-o", str(out)]) == 2
    assert "out-of-place calls only" in capsys.readouterr().err and not out.exists()
    assert main(["export", str(source), "--format", "mscclpp", "-o", str(out)]) == 0
    assert "out of place" in capsys.readouterr().out


def test_cli_exports_a_one_shot_for_both_aliasings(tmp_path, capsys):
    _, algorithm = _synth("oneshot", "ring:8")
    source = tmp_path / "oneshot.json"
    algorithm.save(source)
    xml = tmp_path / "oneshot.xml"
    assert main(["export", str(source), "--no-fuse", "-o", str(xml)]) == 0
    assert "out of place and in place" in capsys.readouterr().out
    assert main(["export", str(source), "--in-place", "-o", str(tmp_path / "x.xml")]) == 2
    plan = tmp_path / "oneshot_plan.json"
    assert main(["export", str(source), "--format", "mscclpp", "--in-place", "-o", str(plan)]) == 0
    assert json.loads(plan.read_text())["inplace"] is True
    assert main(["interpret", str(plan)]) == 0
    back = tmp_path / "back.json"
    assert main(["import", str(xml), "--topology", "ring:8", "--size", "1MB", "-o", str(back)]) == 0
    assert main(["verify", str(back)]) == 0
