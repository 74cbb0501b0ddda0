"""The compiled verifier and simulator against the Python ones (same verdicts, same messages,
bit-identical timings), and the typed reader against the usual one (same algorithm, or it steps
aside)."""

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import random_connected_topology, spread_schedule
from workbench import fastjson
from workbench.algorithm import Algorithm, AlgorithmFormatError, Transfer, _parse, load_algorithm
from workbench.examples import ring_allreduce
from workbench.simulate import SimulationError, simulate
from workbench.verify import InvalidAlgorithm, verify

pytest.importorskip("numba")
typed_load = pytest.importorskip("workbench.typed_load")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ["ag", "bc", "rs", "ar", "wide-ar"]
CORRUPTIONS = ["none", "drop", "rechunk", "redirect", "double", "opflip", "undep", "swap", "badnode", "baddep",
               "selfloop", "dupchunk", "badop"]


def _algorithm(seed: int, kind: str) -> Algorithm:
    rng = random.Random(seed)
    if kind == "wide-ar":  # more than 64 ranks: contribution rows of two words
        return ring_allreduce(rng.randint(65, 80), 1e6)
    n = rng.randint(2, 7)
    topo = random_connected_topology(rng, n, extra=rng.randint(0, 2 * n), switch=rng.random() < 0.4 and kind in ("ag", "bc"))
    k = rng.randint(1, 2)
    if kind == "ag":
        return spread_schedule(rng, topo, "allgather", n, k, multi=rng.random() < 0.5)
    if kind == "bc":
        return spread_schedule(rng, topo, "broadcast", n, k, root=0)
    rs = spread_schedule(rng, topo.reversed(), "allgather", n, k).reverse(topo)
    return rs if kind == "rs" else rs.concat(spread_schedule(rng, topo, "allgather", n, k))


def _corrupt(algorithm: Algorithm, corruption: str, rng: random.Random) -> None:
    transfers = algorithm.transfers
    t = transfers[rng.randrange(len(transfers))]
    if corruption == "drop":
        transfers.remove(t)
        for i, other in enumerate(transfers):
            other.id = i
            other.deps = tuple(d if d < t.id else d - 1 for d in other.deps if d != t.id)
    elif corruption == "rechunk":
        t.chunks = (rng.randrange(algorithm.collective.num_chunks),) + t.chunks[1:]
    elif corruption == "redirect":
        t.dst = rng.randrange(algorithm.topology.num_nodes)
    elif corruption == "double":
        transfers.append(Transfer(len(transfers), t.chunks, t.src, t.dst, "reduce", (t.id,)))
    elif corruption == "opflip":
        t.op = "reduce" if t.op == "copy" else "copy"
    elif corruption == "undep":  # may open a race
        t.deps = ()
    elif corruption == "swap":  # file order changes: missing data or a race
        i = rng.randrange(len(transfers) - 1)
        transfers[i], transfers[i + 1] = transfers[i + 1], transfers[i]
    elif corruption == "badnode":
        t.src = algorithm.topology.num_nodes + rng.randrange(3)
    elif corruption == "baddep":
        t.deps = t.deps + (t.id + rng.randrange(2),)
    elif corruption == "selfloop":
        t.dst = t.src
    elif corruption == "dupchunk":
        t.chunks = t.chunks + t.chunks[:1]
    elif corruption == "badop":
        t.op = "move"


def _outcome(func, *args, **kwargs):
    try:
        result = func(*args, **kwargs)
    except (InvalidAlgorithm, SimulationError) as exc:
        return type(exc).__name__, str(exc), getattr(exc, "kind", None), getattr(exc, "transfer", None)
    return result


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(KINDS), corruption=st.sampled_from(CORRUPTIONS))
def test_both_verifiers_give_the_same_verdict_and_message(seed, kind, corruption):
    algorithm = _algorithm(seed, kind)
    assume(len(algorithm.transfers) >= 2)
    _corrupt(algorithm, corruption, random.Random(seed + 1))
    python = _outcome(verify, algorithm, engine="python")
    compiled = _outcome(verify, algorithm, engine="compiled")
    if isinstance(python, tuple):
        assert compiled == python
    else:
        assert not isinstance(compiled, tuple), compiled
        assert compiled.to_dict() == python.to_dict()


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(KINDS), corruption=st.sampled_from(["none", "undep", "swap",
                                                                                              "badnode", "baddep"]),
       link_model=st.sampled_from(["pipelined", "blocking"]),
       switch_model=st.sampled_from(["cut-through", "store-and-forward"]))
def test_both_simulators_give_bit_identical_timings(seed, kind, corruption, link_model, switch_model):
    algorithm = _algorithm(seed, kind)
    assume(len(algorithm.transfers) >= 2)
    _corrupt(algorithm, corruption, random.Random(seed + 2))
    options = dict(link_model=link_model, switch_model=switch_model)
    python = _outcome(simulate, algorithm, engine="python", **options)
    compiled = _outcome(simulate, algorithm, engine="compiled", **options)
    if isinstance(python, tuple):
        assert compiled == python
        return
    assert compiled.collective_time == python.collective_time
    for field in ("start", "end", "link_busy", "link_bytes"):
        assert np.array_equal(getattr(compiled, field), getattr(python, field)), field
    for ours, theirs in zip(compiled.occupancy, python.occupancy):
        assert np.array_equal(ours, theirs)


def test_a_verified_simulation_lends_its_arrays_and_a_fresh_one_is_made_otherwise():
    algorithm = ring_allreduce(70, 1e6)
    simulation = simulate(algorithm, engine="compiled")
    assert simulation.transfer_arrays[0] is algorithm.transfers
    assert verify(algorithm, simulation=simulation, engine="compiled").delivered_pairs == 70 * 70
    algorithm.transfers = list(algorithm.transfers)  # another list: its arrays are built again, and agree
    assert verify(algorithm, simulation=simulation, engine="compiled").delivered_pairs == 70 * 70
    assert simulate(algorithm, engine="python").transfer_arrays is None


def test_values_the_arrays_cannot_hold_go_the_python_way():
    algorithm = ring_allreduce(4, 1e6)
    algorithm.transfers[3].chunks = (1.5,)  # not an integer: the Python verifier names it
    assert _outcome(verify, algorithm, engine="compiled") == _outcome(verify, algorithm, engine="python")
    assert _outcome(verify, algorithm, engine="compiled")[0] == "InvalidAlgorithm"


def test_engine_names_are_checked():
    with pytest.raises(ValueError, match="engine must be one of"):
        verify(ring_allreduce(4, 1e6), engine="fast")
    with pytest.raises(ValueError, match="engine must be one of"):
        simulate(ring_allreduce(4, 1e6), engine="fast")


# ---------------------------------------------------------------- the typed reader
ENTRY_EDITS = st.sampled_from([
    ("id", True), ("id", 1.0), ("src", None), ("src", "0"), ("chunk", None), ("chunk", 2.0), ("chunks", []),
    ("chunks", [0, 1]), ("chunks", [True]), ("op", None), ("op", "move"), ("deps", None), ("deps", [0.0]),
    ("deps", [True]), ("t_start", 3), ("t_start", True), ("t_end", "1"), ("extra", {"x": 1}), ("id", 2**70),
    ("drop", "chunk"), ("drop", "src"), ("drop", "op"), ("drop", "deps")])


def _usual(text: bytes):
    try:
        return _parse(fastjson.loads(text), "f")
    except AlgorithmFormatError as exc:
        return str(exc)


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(["ag", "ar"]), edits=st.lists(
    st.tuples(st.integers(0, 10**6), ENTRY_EDITS), max_size=3), meta=st.sampled_from([None, {}, {"a": [1, 2.5]}]))
def test_the_typed_reader_reads_what_the_usual_one_reads_or_steps_aside(seed, kind, edits, meta):
    document = json.loads(fastjson.dumps(_algorithm(seed, kind).to_dict()))
    entries = document["transfers"]
    for position, (key, value) in edits:
        entry = entries[position % len(entries)]
        if key == "drop":
            entry.pop(value, None)
        else:
            entry[key] = value
    if meta is None:
        document.pop("meta", None)
    else:
        document["meta"] = meta
    text = json.dumps(document).encode()
    usual = _usual(text)
    typed = typed_load.decode(text)
    if typed is not None:
        assert not isinstance(usual, str), usual  # it took a document the usual reader refuses
        fields, records = typed
        ours = _parse(fields, "f", [Transfer(*record) for record in records])
        assert ours.transfers == usual.transfers and ours.meta == usual.meta
        assert ours.chunk_bytes == usual.chunk_bytes and ours.collective == usual.collective
    elif not edits:
        assert False, "an untouched document must be read the typed way"


def test_a_large_file_is_read_the_typed_way_and_gives_the_same_algorithm(tmp_path, monkeypatch):
    algorithm = ring_allreduce(40, 1e6)
    path = tmp_path / "ar.json"
    algorithm.save(path)
    calls = []
    real = typed_load.decode
    monkeypatch.setattr(typed_load, "decode", lambda text: calls.append(len(text)) or real(text))
    import workbench.algorithm as module
    monkeypatch.setattr(module, "TYPED_FROM_BYTES", 0)
    loaded = load_algorithm(path)
    assert calls and loaded.transfers == algorithm.transfers
    monkeypatch.setattr(module, "TYPED_FROM_BYTES", 1 << 40)
    assert load_algorithm(path).transfers == algorithm.transfers
