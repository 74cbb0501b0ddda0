"""MSCCL++ plans through switches that reduce: NVLS switch channels (``glres``, ``gstore``) in the
export and the interpreter, mscclpp's own NVLS plan as a fixture, and the one-line refusals (SHARP, a
subset of the group, a partial multicast; MSCCL XML at a switch)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.model.algorithm import Algorithm
from workbench.model.collective import make_collective
from workbench.msccl import MscclError
from workbench.mscclpp import export_plan, interpret_plan, parse_plan
from workbench.mscclpp.run import _run
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.topology import build

FIXTURE = Path(__file__).parent / "data" / "mscclpp" / "reduce_nvls.json"
SIZE = 1e6


def nvls(spec: str, kind: str, pieces: int) -> Algorithm:
    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1), SIZE)
    result = call.synthesize(get_formulation("nvls"), problem, time_limit=60, seed=0, pieces=pieces, periodic=False)
    assert result.algorithms, result.message
    return result.algorithms[0]


def names(plan: dict) -> Counter:
    return Counter(op["name"] for gpu in plan["gpus"] for tb in gpu["threadblocks"] for op in tb["ops"])


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


# mscclpp's own plan ---------------------------------------------------------------------------------

def test_mscclpp_reduce_nvls_plan_runs_to_the_full_sums(capsys):
    text = FIXTURE.read_text()
    plan, program = parse_plan(text, "reduce_nvls.json")
    assert plan["collective"] == "allreduce" and plan["inplace"] is True and len(plan["gpus"]) == 2
    for rank, gpu in enumerate(plan["gpus"]):  # each GPU load-reduces and stores its own chunk
        (switch,) = [c for c in gpu["channels"] if c["channel_type"] == "switch"]
        assert switch["buffer_type"] == "i" and switch["rank_groups"] == [{"size": 2, "ranks": [0, 1]}]
        (glres,) = [op for op in program[rank][0] if op.name == "glres"]
        assert glres.reads == glres.writes == [(0, "i", rank, 1), (1, "i", rank, 1)]
    report = interpret_plan(text, "reduce_nvls.json", schedules=5)
    assert report == {"ranks": 2, "transfers": 2, "collective": "allreduce", "schedules": 5, "in_place": True,
                      "aliasings": ["in place"]}
    # the right sums: every GPU's one buffer holds, in every chunk, the sum of both GPUs' inputs
    collective = make_collective("allreduce", 2, 1)
    values = _run(plan, program, collective, "reduce_nvls.json", None, in_place=True)
    for rank in range(2):
        for chunk in range(2):
            held, contributors = values[(rank, "i", chunk)]
            assert held == chunk and contributors == 0b11
    assert main(["interpret", str(FIXTURE), "--schedules", "3"]) == 0
    assert "ok: allreduce on 2 ranks, 2 sends, no races" in capsys.readouterr().out


def test_the_fixture_out_of_place_leaves_the_output_empty():
    with pytest.raises(MscclError, match=r"gpu 0: output o\[0\] \(chunk 0\) must hold the full data"):
        interpret_plan(FIXTURE.read_text(), "reduce_nvls.json", aliasings=[False])


def test_two_glres_on_one_offset_race_and_relaxed_barriers_do_not_order_them():
    plan = json.loads(FIXTURE.read_text())
    glres = [op for op in plan["gpus"][1]["threadblocks"][0]["ops"] if op["name"] == "glres"][0]
    glres["src_buff"][0]["index"] = glres["dst_buff"][0]["index"] = 0  # both GPUs reduce chunk 0
    with pytest.raises(MscclError, match=r"race on gpu \d i\[0\]: gpu \d tb 0 op 5 \(glres\)"):
        interpret_plan(json.dumps(plan))


def test_a_switch_channel_must_be_declared_by_the_whole_group():
    plan = json.loads(FIXTURE.read_text())
    plan["gpus"][1]["channels"][1]["buffer_type"] = "o"
    with pytest.raises(MscclError, match=r"gpu 0: its switch channel over 'i' with ranks \[0, 1\] is not declared "
                                         r"alike by gpu 1"):
        interpret_plan(json.dumps(plan))
    plan = json.loads(FIXTURE.read_text())
    plan["gpus"][0]["channels"][1]["rank_groups"] = [{"size": 1, "ranks": [1]}]
    with pytest.raises(MscclError, match=r"gpu 0: channels\[1\].rank_groups\[0\].ranks=\[1\] leave out the gpu"):
        interpret_plan(json.dumps(plan))


# export of the nvls formulation ---------------------------------------------------------------------

@pytest.mark.parametrize("pieces", [1, 2])
@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
def test_nvls_exports_and_interprets_race_free(kind, pieces, tmp_path, capsys):
    algorithm = nvls("hgx:1", kind, pieces)
    source, out = tmp_path / "nv.json", tmp_path / "nv.plan.json"
    algorithm.save(str(source))
    assert main(["export", str(source), "--format", "mscclpp", "-o", str(out)]) == 0
    assert "no race and every postcondition holds, out of place and in place" in capsys.readouterr().out
    assert main(["interpret", str(out), "--schedules", "3"]) == 0
    assert "no races, postconditions hold" in capsys.readouterr().out
    plan = json.loads(out.read_text())
    counts = names(plan)
    chunks = 8 * pieces  # one NVLS operation per chunk
    operation = "gstore" if kind == "allgather" else "glres"
    assert counts[operation] == chunks and counts["put"] == counts["glres" if kind == "allgather" else "gstore"] == 0
    for gpu in plan["gpus"]:
        switches = [c for c in gpu["channels"] if c["channel_type"] == "switch"]
        assert all(c["rank_groups"] == [{"size": 8, "ranks": list(range(8))}] for c in switches)
        buffers = [c["buffer_type"] for c in switches]
        # All-Reduce and All-Gather work in the output; Reduce-Scatter loads the inputs into reserved scratch
        assert buffers == {"allreduce": ["o"], "allgather": ["o"], "reducescatter": ["i", "s"]}[kind]
        (block,) = gpu["threadblocks"]
        assert {"channel_type": "switch", "channel_ids": list(range(len(switches)))} in block["channels"]
        for op in block["ops"]:
            if op["name"] == "glres":
                assert op["channel_type"] == "switch" and op["reduce_op"] == "sum"
                src, dst = op["src_buff"][0], op["dst_buff"][0]
                if kind == "allreduce":  # load-reduce and multicast store fused: one offset of one channel
                    assert src == dst
                else:
                    assert (src["switch_channel_id"], dst["switch_channel_id"]) == (0, 1)
                    assert dst["index"] >= gpu["scratch_chunks"] - chunks
            if op["name"] == "gstore":
                assert op["src_buff"][0]["type"] == "o" and "switch_channel_id" in op["dst_buff"][0]


def test_an_allreduce_across_two_boxes_mixes_nvls_with_port_channels():
    algorithm = nvls("hgx:2", "allreduce", 1)
    plan = export_plan(algorithm, gpus_per_node=8)
    counts = names(plan)
    # each box load-reduces all 16 chunks (not fused: the box sum crosses to the other box by put first)
    assert counts["glres"] == 32 and counts["gstore"] == 32 and counts["put"] == 32
    assert any(c["channel_type"] == "port" for gpu in plan["gpus"] for c in gpu["channels"])
    groups = {tuple(g["ranks"]) for gpu in plan["gpus"] for c in gpu["channels"] if c["channel_type"] == "switch"
              for g in c["rank_groups"]}
    assert groups == {tuple(range(8)), tuple(range(8, 16))}
    interpret_plan(json.dumps(plan), schedules=2, aliasings=[False, True])


def test_a_deleted_readiness_wait_is_a_race():
    plan = export_plan(nvls("hgx:1", "allreduce", 1))
    ops = plan["gpus"][0]["threadblocks"][0]["ops"]
    first = next(i for i, op in enumerate(ops) if op["name"] == "glres")
    wait = max(i for i, op in enumerate(ops[:first]) if op["name"] == "wait")
    del ops[wait]  # gpu 0 loads before the last contributor said its value is in place
    with pytest.raises(MscclError, match=r"race on gpu \d o\[0\]: .*\(glres\)"):
        interpret_plan(json.dumps(plan))


def test_relaxed_signals_order_no_data():
    plan = export_plan(nvls("hgx:1", "allreduce", 1))
    interpret_plan(json.dumps(plan))
    relaxed = copy.deepcopy(plan)
    for gpu in relaxed["gpus"]:
        for op in gpu["threadblocks"][0]["ops"]:
            op["name"] = {"signal": "rlxsignal", "wait": "rlxwait"}.get(op["name"], op["name"])
    with pytest.raises(MscclError, match=r"race on gpu \d o\[\d\]"):
        interpret_plan(json.dumps(relaxed))


# refusals -------------------------------------------------------------------------------------------

def test_sharp_is_refused_in_one_line(tmp_path, capsys):
    source = tmp_path / "sharp.json"
    nvls("hgx:2,sharp", "allreduce", 1).save(str(source))
    out = tmp_path / "sharp.plan.json"
    assert main(["export", str(source), "--format", "mscclpp", "-o", str(out)]) == 2
    err = one_line_error(capsys)
    assert "-> 18, reduce, chunk" in err and "switch 18 is a SHARP switch" in err
    assert "SHARP reductions are not expressible in MSCCL++ plans" in err
    assert not out.exists()


def _subset_reduction() -> Algorithm:
    """A valid Reduce to GPU 0 on hgx:1 whose switch load-reduce sums GPUs 0-3 only (4-7 reduce into 0
    directly)."""
    s = 8
    steps = [(0, j, s, "reduce", ()) for j in range(4)] + [(0, s, 0, "copy", (0, 1, 2, 3))]
    steps += [(0, j, 0, "reduce", (4,)) for j in range(4, 8)]
    return Algorithm.from_steps(build("hgx:1"), make_collective("reduce", 8, 1, 0), SIZE, steps)


def _partial_multicast() -> Algorithm:
    s = 8
    steps = [(0, 0, s, "copy", ())] + [(0, s, j, "copy", (0,)) for j in range(1, 4)]
    steps += [(0, 0, j, "copy", ()) for j in range(4, 8)]
    return Algorithm.from_steps(build("hgx:1"), make_collective("broadcast", 8, 1, 0), SIZE, steps)


@pytest.mark.parametrize("make, message", [
    (_subset_reduction, r"transfer 0 \(0 -> 8, reduce, chunk 0\): the reduction of chunk 0 into switch 8 sums GPUs "
                        r"\[0, 1, 2, 3\] only, not all of its group \[0, 1, 2, 3, 4, 5, 6, 7\]"),
    (_partial_multicast, r"transfer 0 \(0 -> 8, copy, chunk 0\): the multicast of chunk 0 from GPU 0 through switch 8 "
                         r"reaches GPUs \[1, 2, 3\], not every other GPU of its group"),
])
def test_part_of_the_group_is_refused_in_one_line(make, message, tmp_path, capsys):
    source = tmp_path / "part.json"
    make().save(str(source))
    assert main(["export", str(source), "--format", "mscclpp", "-o", str(tmp_path / "part.plan.json")]) == 2
    err = one_line_error(capsys)
    assert re.search(message, err), err


def test_whole_group_broadcast_and_reduce_export():
    topology, s = build("hgx:1"), 8
    store = Algorithm.from_steps(topology, make_collective("broadcast", 8, 1, 0), SIZE,
                                 [(0, 0, s, "copy", ())] + [(0, s, j, "copy", (0,)) for j in range(1, 8)])
    load = Algorithm.from_steps(topology, make_collective("reduce", 8, 1, 0), SIZE,
                                [(0, j, s, "reduce", ()) for j in range(8)] + [(0, s, 0, "copy", tuple(range(8)))])
    for algorithm, name in ((store, "gstore"), (load, "glres")):
        plan = export_plan(algorithm)
        assert names(plan)[name] == 1
        interpret_plan(json.dumps(plan), root=0, aliasings=[False, True])


def test_msccl_xml_refuses_a_switch_operation_in_one_line(tmp_path, capsys):
    source = tmp_path / "nv.json"
    nvls("hgx:1", "allreduce", 1).save(str(source))
    assert main(["export", str(source), "-o", str(tmp_path / "nv.xml")]) == 2
    err = one_line_error(capsys)
    assert "transfer 0 (0 -> 8, reduce): node 8 is a switch; MSCCL addresses GPUs only and has no in-switch " \
           "reduction or multicast (NVLS, SHARP)" in err
    assert not (tmp_path / "nv.xml").exists()
