"""MSCCL XML against NCCL's rank-major buffer layout, peer fields, and the race analysis.

The hand-written files follow msccl-tools' documented rules, not our exporter: NCCL's All-Gather
output is the ranks' inputs concatenated in rank order (rank r's chunk j at o[r*k + j]); its
Reduce-Scatter input holds rank r's block at i[r*k + j]; All-to-All sends piece j for d from
i[d*k + j] into o[s*k + j]; a send names the receiver's slot and a receive the sender's slot.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msccl_steps import step_xml

from workbench.plugin import call
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


def _algo(coll: str, n: int, nchunks: int, gpus: str) -> str:
    return (f'<algo name="hand_{coll}" proto="Simple" nchannels="1" nchunksperloop="{nchunks}" ngpus="{n}" '
            f'coll="{coll}" inplace="0" outofplace="1" minBytes="0" maxBytes="0">\n{gpus}</algo>\n')


# All-Gather, 2 ranks, 2 chunks each: rank r sends i[0..1] into the peer's o[2r..2r+1]
ALLGATHER_2x2 = _algo("allgather", 2, 4, "".join(
    f'<gpu id="{r}" i_chunks="2" o_chunks="4" s_chunks="0">'
    f'<tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">'
    + step_xml(0, "s", "i", 0, "o", 2 * r, 2) + step_xml(1, "r", "i", 0, "o", 2 * (1 - r), 2)
    + '</tb><tb id="1" send="-1" recv="-1" chan="0">' + step_xml(0, "cpy", "i", 0, "o", 2 * r, 2) + "</tb></gpu>\n"
    for r in range(2)))

# All-to-All, 2 ranks, 2 chunks per pair: rank s sends i[2d..2d+1] into d's o[2s..2s+1]
ALLTOALL_2x2 = _algo("alltoall", 2, 4, "".join(
    f'<gpu id="{r}" i_chunks="4" o_chunks="4" s_chunks="0">'
    f'<tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">'
    + step_xml(0, "s", "i", 2 * (1 - r), "o", 2 * r, 2) + step_xml(1, "r", "i", 2 * r, "o", 2 * (1 - r), 2)
    + '</tb><tb id="1" send="-1" recv="-1" chan="0">' + step_xml(0, "cpy", "i", 2 * r, "o", 2 * r, 2) + "</tb></gpu>\n"
    for r in range(2)))

# Reduce-Scatter, 2 ranks, 2 chunks each: rank r's block is i[2r..2r+1]; rrc adds the local block
# (src i) to what arrives and writes o (dst), as the runtime's recvReduceCopy does
REDUCESCATTER_2x2 = _algo("reducescatter", 2, 4, "".join(
    f'<gpu id="{r}" i_chunks="4" o_chunks="2" s_chunks="0">'
    f'<tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">'
    + step_xml(0, "s", "i", 2 * (1 - r), "o", 0, 2) + step_xml(1, "rrc", "i", 2 * r, "o", 0, 2)
    + "</tb></gpu>\n" for r in range(2)))

# the same All-Gather laid out chunk-major (rank r's chunk j at o[j*2 + r]): what NCCL would permute
ALLGATHER_CHUNK_MAJOR = _algo("allgather", 2, 4, "".join(
    f'<gpu id="{r}" i_chunks="2" o_chunks="4" s_chunks="0">'
    f'<tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">'
    + step_xml(0, "s", "i", 0, "o", r, 1) + step_xml(1, "s", "i", 1, "o", 2 + r, 1)
    + step_xml(2, "r", "i", 0, "o", 1 - r, 1) + step_xml(3, "r", "i", 1, "o", 3 - r, 1)
    + '</tb><tb id="1" send="-1" recv="-1" chan="0">' + step_xml(0, "cpy", "i", 0, "o", r, 1)
    + step_xml(1, "cpy", "i", 1, "o", 2 + r, 1) + "</tb></gpu>\n" for r in range(2)))


@pytest.mark.parametrize("text, kind", [(ALLGATHER_2x2, "allgather"), (ALLTOALL_2x2, "alltoall"),
                                        (REDUCESCATTER_2x2, "reducescatter")])
def test_hand_written_rank_major_files_interpret_import_and_verify(text, kind):
    report = interpret(text, "hand.xml", schedules=5)
    assert report["collective"] == kind and report["ranks"] == 2
    algorithm = import_xml(text, build("ring:2"), SIZE, "hand.xml")
    assert algorithm.collective.chunks_per_rank == 2
    verify(algorithm, simulation=simulate(algorithm))


def test_chunk_major_layout_is_rejected_with_the_slot_named():
    with pytest.raises(MscclError, match=r"rank 0: output o\[2\] \(chunk 1\) must hold the full data"):
        interpret(ALLGATHER_CHUNK_MAJOR, "old.xml")


def _steps(text: str):
    """(rank, tb element, step element) for every step of a file."""
    for gpu in ET.fromstring(text).findall("gpu"):
        for tb in gpu.findall("tb"):
            for step in tb.findall("step"):
                yield int(gpu.get("id")), tb, step


def _own_copies(text: str) -> dict[int, set[tuple[int, int, int]]]:
    copies: dict[int, set[tuple[int, int, int]]] = {}
    for rank, _, step in _steps(text):
        if step.get("type") == "cpy" and step.get("srcbuf") == "i" and step.get("dstbuf") == "o":
            copies.setdefault(rank, set()).add((int(step.get("srcoff")), int(step.get("dstoff")), int(step.get("cnt"))))
    return copies


def _expand(copies: set[tuple[int, int, int]]) -> set[tuple[int, int]]:
    return {(src + i, dst + i) for src, dst, cnt in copies for i in range(cnt)}


def _synthesize(name: str, spec: str, kind: str, k: int):
    topology = build(spec)
    problem = Problem(topology, make_collective(kind, topology.num_npus, k), SIZE)
    return call.synthesize(get_formulation(name), problem, time_limit=30, seed=0).algorithms[0]


@pytest.mark.parametrize("name", ["ring", "tacos"])
def test_exported_allgather_with_two_chunks_is_rank_major(name):
    algorithm = _synthesize(name, "ring:4", "allgather", 2)
    for fuse in (False, True):
        text = export_xml(algorithm, fuse=fuse)
        copies = _own_copies(text)
        for r in range(4):  # rank r's own input chunk j lands at o[r*2 + j]
            assert _expand(copies[r]) == {(0, 2 * r), (1, 2 * r + 1)}, (r, copies[r])
        interpret(text, schedules=3)
        verify(import_xml(text, algorithm.topology, SIZE))


def test_exported_instances_are_rank_major():
    algorithm = _synthesize("ring", "ring:4", "allgather", 1)
    text = export_xml(algorithm, instances=2, fuse=False)
    copies = _own_copies(text)
    for r in range(4):  # chunk 0 of rank r split in two: o[r*2], o[r*2 + 1]
        assert _expand(copies[r]) == {(0, 2 * r), (1, 2 * r + 1)}
    interpret(text)


def test_exported_alltoall_with_two_chunks_is_rank_major():
    algorithm = _synthesize("bfs-trees", "ring:4", "alltoall", 2)
    text = export_xml(algorithm, fuse=False)
    copies = _own_copies(text)
    for r in range(4):  # the pieces a rank keeps: i[r*2 + j] -> o[r*2 + j]
        assert _expand(copies[r]) == {(2 * r, 2 * r), (2 * r + 1, 2 * r + 1)}
    interpret(text)
    verify(import_xml(text, algorithm.topology, SIZE))


@pytest.mark.parametrize("name, kind", [("ring", "allgather"), ("tacos", "reducescatter"), ("ring", "allreduce")])
def test_peer_fields_name_each_other(name, kind):
    algorithm = _synthesize(name, "ring:4", kind, 2)
    text = export_xml(algorithm, fuse=False)
    sends: dict[tuple[int, int, int], list] = {}
    receives: dict[tuple[int, int, int], list] = {}
    for rank, tb, step in _steps(text):
        chan = int(tb.get("chan"))
        if step.get("type") == "s":
            sends.setdefault((rank, int(tb.get("send")), chan), []).append(step)
        elif step.get("type") in ("r", "rrc"):
            receives.setdefault((int(tb.get("recv")), rank, chan), []).append(step)
    assert sends
    for key, sent in sends.items():
        for s, r in zip(sent, receives[key], strict=True):
            assert (s.get("dstbuf"), s.get("dstoff")) == (r.get("dstbuf"), r.get("dstoff"))
            if r.get("type") == "r":
                assert (r.get("srcbuf"), r.get("srcoff")) == (s.get("srcbuf"), s.get("srcoff"))


def test_inconsistent_peer_fields_are_reported():
    text = ALLGATHER_2x2.replace(step_xml(0, "s", "i", 0, "o", 0, 2), step_xml(0, "s", "i", 0, "o", 1, 2), 1)
    assert text != ALLGATHER_2x2
    with pytest.raises(MscclError, match=r"peer fields disagree: rank 0 tb 0 step 0 names o\[1\]"):
        interpret(text)


def _drop_dependency(text: str, index: int) -> tuple[str, int, int, int]:
    """Remove the index-th cross-threadblock dependency of a send; returns the file and (rank, tb, step)."""
    root = ET.fromstring(text)
    found = []
    for gpu in root.findall("gpu"):
        for tb in gpu.findall("tb"):
            for step in tb.findall("step"):
                if step.get("type") == "s" and int(step.get("depid")) >= 0:
                    found.append((gpu, tb, step))
    gpu, tb, step = found[index % len(found)]
    step.set("depid", "-1")
    step.set("deps", "-1")
    return ET.tostring(root, encoding="unicode"), int(gpu.get("id")), int(tb.get("id")), int(step.get("s"))


def test_a_deleted_dependency_is_reported_as_a_race_naming_both_steps():
    algorithm = _synthesize("ring", "ring:4", "allgather", 1)
    text = export_xml(algorithm, fuse=False)
    interpret(text, schedules=5)  # the export itself is race-free
    broken, rank, tb, step = _drop_dependency(text, 0)
    with pytest.raises(MscclError) as info:
        interpret(broken, "broken.xml")
    message = str(info.value)
    assert f"race on rank {rank}" in message and f"tb {tb} step {step} (s) reads it" in message
    assert re.search(r"tb \d+ step \d+ \((cpy|r)\) writes it", message)  # what filled the slot it sends


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(["ring:4", "ring:6", "dgx1"]), kind=st.sampled_from(["allgather", "reducescatter"]),
       which=st.integers(0, 1000))
def test_any_deleted_forwarding_dependency_is_a_race(spec, kind, which):
    algorithm = _synthesize("ring", spec, kind, 1)
    broken, rank, _, _ = _drop_dependency(export_xml(algorithm, fuse=False), which)
    with pytest.raises(MscclError, match=f"race on rank {rank} "):
        interpret(broken)


def test_two_unordered_reductions_into_one_slot_race():
    gpus = ['<gpu id="0" i_chunks="3" o_chunks="1" s_chunks="0">'
            '<tb id="0" send="-1" recv="1" chan="0">' + step_xml(0, "rrc", "i", 0, "o", 0, 1) + "</tb>"
            '<tb id="1" send="-1" recv="2" chan="0">' + step_xml(0, "rrc", "i", 0, "o", 0, 1) + "</tb></gpu>\n"]
    for r in (1, 2):
        gpus.append(f'<gpu id="{r}" i_chunks="3" o_chunks="1" s_chunks="0"><tb id="0" send="0" recv="-1" chan="0">'
                    + step_xml(0, "s", "i", 0, "o", 0, 1) + "</tb></gpu>\n")
    text = _algo("reducescatter", 3, 3, "".join(gpus))
    with pytest.raises(MscclError, match=r"race on rank 0 o\[0\]: tb 0 step 0 \(rrc\) writes it and "
                                         r"tb 1 step 0 \(rrc\) writes it"):
        interpret(text)


def test_concurrent_reductions_land_apart_and_keep_the_plan_timing():
    topology = build("dgx1")
    problem = Problem(topology, make_collective("allreduce", 8, 1), SIZE)
    algorithm = call.synthesize(get_formulation("sccl"), problem, time_limit=60, seed=0, steps=2, rounds=2,
                                                   backend=SCCL_ENGINE).algorithms[0]
    text = export_xml(algorithm, fuse=False)
    assert 'type="re"' in text  # partial sums from two neighbours land in scratch and are added locally
    interpret(text, schedules=3)
    imported = import_xml(text, topology, SIZE)
    verify(imported)
    assert simulate(imported).collective_time == pytest.approx(simulate(algorithm).collective_time, rel=1e-9)


def test_cli_interpret_schedules(tmp_path, capsys):
    path = tmp_path / "ag.xml"
    path.write_text(ALLGATHER_2x2)
    assert main(["interpret", str(path), "--schedules", "4", "--seed", "7"]) == 0
    assert "no races" in capsys.readouterr().out
    assert main(["interpret", str(path), "--schedules", "-1"]) == 2
    racy = tmp_path / "racy.xml"
    racy.write_text(_drop_dependency(export_xml(_synthesize("ring", "ring:4", "allgather", 1), fuse=False), 0)[0])
    assert main(["interpret", str(racy)]) == 1
    assert "race on rank" in capsys.readouterr().err
