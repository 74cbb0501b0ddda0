"""MSCCL XML written by other tools: the styles of RCCL's shipped algorithms, ASTRA-sim's custom
collectives and TE-CCL's exports, reproduced by small generators of our own (in-place buffers,
scratch, ``cnt`` > 1, ``nop`` chains, local ``re`` reductions, several channels, missing or extra
attributes, extra child elements)."""

from __future__ import annotations

import pytest

from msccl_steps import step_xml

from workbench.cli import main
from workbench.msccl import MscclError, import_xml, interpret
from workbench.checking.simulate import simulate
from workbench.topology import build
from workbench.checking.verify import verify

SIZE = 2**24


def astra_style_ring_allreduce(n: int) -> str:
    """One threadblock per GPU (send to r+1, receive from r-1), in place, LL128, and none of
    ``outofplace``, ``minBytes``, ``maxBytes``: reduce-scatter by rrc/s pairs, then all-gather by r/s."""
    gpus = []
    for r in range(n):
        steps = [("s", r)]
        for i in range(1, n):  # reduce-scatter: add the neighbour's partial sum of chunk r - i, pass it on
            steps += [("rrc", (r - i) % n), ("s", (r - i) % n)]
        for i in range(n - 1):  # all-gather: receive the finished chunk r - i, pass it on but the last
            steps.append(("r", (r - i) % n))
            if i < n - 2:
                steps.append(("s", (r - i) % n))
        body = "".join(step_xml(s, kind, "i", c, "i", c) for s, (kind, c) in enumerate(steps))
        gpus.append(f'<gpu id="{r}" i_chunks="{n}" o_chunks="0" s_chunks="0">'
                    f'<tb id="0" send="{(r + 1) % n}" recv="{(r - 1) % n}" chan="0">{body}</tb></gpu>\n')
    return (f'<algo name="ring_allreduce_{n}" proto="LL128" nchannels="1" nchunksperloop="{n}" ngpus="{n}" '
            f'coll="allreduce" inplace="1">\n{"".join(gpus)}</algo>\n')


def rccl_style_allpairs_allreduce(n: int, k: int) -> str:
    """In place, k chunks per rank, every pair direct: each peer's block goes (cnt=k) into the peer's
    scratch; a local threadblock waits on every receive through a nop chain, adds the blocks with
    ``re`` steps, and the peer threadblocks (two channels) then send the finished block back.
    Extra attributes (``maxcount``, ``redop``) as the shipped files carry."""
    gpus = []
    for r in range(n):
        peers = [p for p in range(n) if p != r]
        local = len(peers)  # the local threadblock's id
        last_add = 2 * len(peers) - 2  # index of the last re step in the local threadblock (after the nops)
        tbs = []
        for t, p in enumerate(peers):
            tbs.append(f'<tb id="{t}" send="{p}" recv="{p}" chan="{(r + p) % 2}">'
                       + step_xml(0, "s", "i", p * k, "s", r * k, k)
                       + step_xml(1, "r", "i", r * k, "s", p * k, k, hasdep=1)
                       + step_xml(2, "s", "i", r * k, "i", r * k, k, depid=local, deps=last_add)
                       + step_xml(3, "r", "i", p * k, "i", p * k, k) + "</tb>")
        chain = [step_xml(i, "nop", cnt=0, depid=t, deps=1) for i, t in enumerate(range(len(peers) - 1))]
        adds = [step_xml(len(chain) + i, "re", "s", p * k, "i", r * k, k,
                      depid=(len(peers) - 1 if i == 0 else -1), deps=(1 if i == 0 else -1),
                      hasdep=int(i == len(peers) - 1)) for i, p in enumerate(peers)]
        tbs.append(f'<tb id="{local}" send="-1" recv="-1" chan="0">' + "".join(chain + adds) + "</tb>")
        gpus.append(f'<gpu id="{r}" i_chunks="{n * k}" o_chunks="0" s_chunks="{n * k}">{"".join(tbs)}</gpu>\n')
    return (f'<algo name="allpairs_{n}" proto="Simple" nchannels="2" nchunksperloop="{n * k}" ngpus="{n}" '
            f'coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1048576" maxcount="8" '
            f'redop="sum">\n{"".join(gpus)}</algo>\n')


def teccl_style_ring_allgather(n: int) -> str:
    """Out of place, separate send, receive and copy threadblocks per GPU, forwarding sends that wait
    on the receive threadblock, and ``<copy>`` / ``<reduce>`` children that the runtimes ignore."""
    gpus = []
    for r in range(n):
        receive = [step_xml(i, "r", "o" if i else "i", (r - 1 - i) % n if i else 0, "o", (r - 1 - i) % n,
                         hasdep=int(i < n - 2)) for i in range(n - 1)]
        send = [step_xml(0, "s", "i", 0, "o", r)]
        send += [step_xml(1 + i, "s", "o", (r - 1 - i) % n, "o", (r - 1 - i) % n, depid=1, deps=i) for i in range(n - 2)]
        gpus.append(f'<gpu id="{r}" i_chunks="1" o_chunks="{n}" s_chunks="0">'
                    f'<copy chunk="{r}" buffer="i" index="0"/><reduce chunk="{r}" buffer="o" index="{r}"/>'
                    f'<tb id="0" send="{(r + 1) % n}" recv="-1" chan="0">{"".join(send)}</tb>'
                    f'<tb id="1" send="-1" recv="{(r - 1) % n}" chan="0">{"".join(receive)}</tb>'
                    f'<tb id="2" send="-1" recv="-1" chan="0">{step_xml(0, "cpy", "i", 0, "o", r)}</tb></gpu>\n')
    return (f'<algo name="teccl_ring_{n}" proto="Simple" nchannels="1" nchunksperloop="{n}" ngpus="{n}" '
            f'coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">\n{"".join(gpus)}</algo>\n')


FILES = {
    "astra-ring-allreduce": (lambda: astra_style_ring_allreduce(8), "ring:8", "allreduce", 1),
    "rccl-allpairs-allreduce": (lambda: rccl_style_allpairs_allreduce(4, 3), "fc:4", "allreduce", 3),
    "teccl-ring-allgather": (lambda: teccl_style_ring_allgather(6), "ring:6", "allgather", 1),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_foreign_style_files_verify_and_simulate(name):
    make, spec, kind, per_rank = FILES[name]
    text = make()
    report = interpret(text, f"{name}.xml", schedules=5, seed=1)
    assert report["collective"] == kind
    assert report["in_place"] == ("allreduce" in name)
    algorithm = import_xml(text, build(spec), SIZE, f"{name}.xml")
    assert algorithm.collective.chunks_per_rank == per_rank
    simulation = simulate(algorithm)
    verify(algorithm, simulation=simulation)
    assert simulation.collective_time > 0


def test_in_place_aliasing_is_what_makes_the_ring_correct():
    text = astra_style_ring_allreduce(4)
    out_of_place = text.replace('inplace="1"', 'inplace="1" outofplace="1"')  # now checked out of place
    with pytest.raises(MscclError, match=r"output o\[0\]"):
        interpret(out_of_place)


def test_a_missing_local_dependency_in_the_scratch_style_is_a_race():
    text = rccl_style_allpairs_allreduce(4, 2)
    broken = text.replace(step_xml(2, "s", "i", 0, "i", 0, 2, depid=3, deps=4),
                          step_xml(2, "s", "i", 0, "i", 0, 2), 1)
    assert broken != text
    with pytest.raises(MscclError, match=r"race on rank 0 i\[0\]: .*\(s\) reads it"):
        interpret(broken)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('type="rrc"', 'type="ra"', 1), r"rank 0 tb 0 step 1 \(ra\): unknown step type 'ra'"),
    (lambda t: t.replace(' cnt="1"', "", 1), r"rank 0 tb 0 step 0: attribute cnt=None must be an integer"),
    (lambda t: t.replace('coll="allreduce"', 'coll="custom"'), r"collective 'custom' is not one"),
])
def test_files_it_cannot_express_get_one_line_naming_the_element(tmp_path, capsys, edit, message):
    text = edit(astra_style_ring_allreduce(4))
    with pytest.raises(MscclError, match=message):
        interpret(text)
    path = tmp_path / "bad.xml"
    path.write_text(text)
    assert main(["import", str(path), "--topology", "ring:4", "--size", "1MB", "-o", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "a.json").exists()
