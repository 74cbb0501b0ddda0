"""The compiled verifier and simulator against the Python ones (same verdicts, same messages,
bit-identical timings), and the typed reader against the usual one (same algorithm, or it steps
aside)."""

import importlib
import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedules import random_algorithm
from workbench.util import fastjson
from workbench.model.algorithm import Algorithm, AlgorithmFormatError, Transfer, load_algorithm
from workbench.model.algorithm_format import read_document as _parse
from workbench.model.collective import Collective, make_collective
from workbench.kit.examples import ring_allreduce
from workbench.topology import Link, Topology
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify

pytest.importorskip("numba")
typed_load = pytest.importorskip("workbench.model.typed_load")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ["ag", "bc", "rs", "ar", "wide-ar"]
CORRUPTIONS = ["none", "drop", "rechunk", "redirect", "double", "opflip", "undep", "swap", "badnode", "baddep",
               "selfloop", "dupchunk", "badop"]


def _algorithm(seed: int, kind: str) -> Algorithm:
    if kind == "wide-ar":  # more than 64 ranks: contribution rows of two words
        return ring_allreduce(random.Random(seed).randint(65, 80), 1e6)
    return random_algorithm(seed, kind, max_ranks=7, switch_chance=0.4)


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
    except Exception as exc:  # any exception: both engines must raise the same one
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
    if isinstance(python, tuple):  # both refused the algorithm, with the same error
        assert compiled == python
    else:
        assert compiled.collective_time == python.collective_time
        for field in ("start", "end", "link_busy", "link_bytes"):
            assert np.array_equal(getattr(compiled, field), getattr(python, field)), field
        for ours, theirs in zip(compiled.occupancy, python.occupancy, strict=True):
            assert np.array_equal(ours, theirs)


def _line_broadcast(alpha_after_first: float, chunk_bytes: float) -> Algorithm:
    """A broadcast down a line 0 -> 1 -> 2 -> 3 whose later hops take no time at all."""
    topology = Topology.create(4, [Link(0, 1, 1e-6, 50e9), Link(1, 2, alpha_after_first, 50e9),
                                   Link(2, 3, alpha_after_first, 50e9)])
    collective = Collective("custom", 4, 1, (frozenset({0}),), (frozenset({0, 1, 2, 3}),), False)
    return Algorithm.from_steps(topology, collective, chunk_bytes,
                                [(0, 0, 1, "copy", ()), (0, 1, 2, "copy", (0,)), (0, 2, 3, "copy", (1,))])


def _edited(edit):
    algorithm = ring_allreduce(4, 1e6)
    edit(algorithm)
    return algorithm


ODD_ALGORITHMS = {  # values and shapes only an API caller can make; each must get the Python verdict
    "zero-time hops": lambda: _line_broadcast(0.0, 1e-300),
    "op not hashable": lambda: _edited(lambda a: setattr(a.transfers[2], "op", ["copy"])),
    "chunks not a sequence after an earlier error": lambda: _edited(
        lambda a: (setattr(a.transfers[0], "dst", a.transfers[0].src), setattr(a.transfers[3], "chunks", 7))),
    "a node as a 0-d array": lambda: _edited(lambda a: setattr(a.transfers[1], "src", np.array(a.transfers[1].src))),
    "a chunk as a float": lambda: _edited(lambda a: setattr(a.transfers[3], "chunks", (1.5,))),
    "numpy integers and bools": lambda: _edited(lambda a: [setattr(t, "dst", np.int64(t.dst)) for t in a.transfers]),
    "a chunk nobody holds": lambda: Algorithm.from_steps(
        Topology.create(2, [Link(0, 1, 1e-6, 50e9), Link(1, 0, 1e-6, 50e9)]),
        Collective("custom", 2, 1, (frozenset({0}), frozenset()), (frozenset({0, 1}), frozenset()), False),
        1e6, [(0, 0, 1, "copy", ())]),
}


@pytest.mark.parametrize("name", sorted(ODD_ALGORITHMS))
def test_odd_algorithms_get_the_python_verdict(name):
    make = ODD_ALGORITHMS[name]
    compiled, python = (_outcome(verify, make(), engine=engine) for engine in ("compiled", "python"))
    assert (compiled if isinstance(compiled, tuple) else compiled.to_dict()) == \
        (python if isinstance(python, tuple) else python.to_dict())


@pytest.mark.parametrize("chunk_bytes", [np.float32(1e6 / 3), 2**53 + 1])
def test_chunk_sizes_of_other_types_time_as_in_python(chunk_bytes):
    topology = Topology.create(2, [Link(0, 1, 0.0, 3.0), Link(1, 0, 0.0, 3.0)])
    algorithm = Algorithm.from_steps(topology, make_collective("broadcast", 2, 3), chunk_bytes,
                                     [((0, 1, 2), 0, 1, "copy", ())])
    python, compiled = simulate(algorithm, engine="python"), simulate(algorithm, engine="compiled")
    assert compiled.end.dtype == python.end.dtype and np.array_equal(compiled.end, python.end)
    assert np.array_equal(compiled.link_bytes, python.link_bytes)


def test_auto_takes_the_compiled_engine_by_size_only():
    small = ring_allreduce(4, 1e6)
    importlib.import_module("numba")  # loaded: still the Python engine below the threshold
    from workbench.compiled.engines import choose_engine
    from workbench.checking.verify import COMPILED_FROM
    assert choose_engine("auto", len(small.transfers), COMPILED_FROM, "verify", eager=False) == "python"
    assert choose_engine("auto", COMPILED_FROM, COMPILED_FROM, "verify", eager=False) == "compiled"


def test_values_the_arrays_cannot_hold_go_the_python_way():
    algorithm = ring_allreduce(4, 1e6)
    algorithm.transfers[3].chunks = (1.5,)  # not an integer: the Python verifier names it
    assert _outcome(verify, algorithm, engine="compiled") == _outcome(verify, algorithm, engine="python")
    assert _outcome(verify, algorithm, engine="compiled")[0] == "InvalidAlgorithm"


def test_engine_names_are_checked():
    with pytest.raises(ValueError, match="engine must be one of"):
        verify(ring_allreduce(4, 1e6), engine="fast")
    for order in ("in-order", "fifo"):
        with pytest.raises(ValueError, match="engine must be one of"):
            simulate(ring_allreduce(4, 1e6), order=order, engine="fast")


# ---------------------------------------------------------------- the typed reader
ENTRY_EDITS = st.sampled_from([
    ("id", True), ("id", 1.0), ("src", None), ("src", "0"), ("chunk", None), ("chunk", 2.0), ("chunks", []),
    ("chunks", [0, 1]), ("chunks", [True]), ("op", None), ("op", "move"), ("deps", None), ("deps", [0.0]),
    ("deps", [True]), ("t_start", 3), ("t_start", True), ("t_end", "1"), ("extra", {"x": 1}), ("id", 2**70),
    ("drop", "chunk"), ("drop", "src"), ("drop", "op"), ("drop", "deps"), ("id", 2**63), ("extra", "\udc80")])
META = st.sampled_from([None, {}, {"a": [1, 2.5]}, {"bound": 2**64 + 1}, {"bound": -2**63 - 1}, {"bound": 2**64 - 1},
                        {"note": "caf\u00e9"}])


def _usual(text: bytes):
    try:
        return _parse(fastjson.loads(text), "f")
    except (AlgorithmFormatError, UnicodeDecodeError) as exc:
        return str(exc)


@SETTINGS
@given(seed=st.integers(0, 10**9), kind=st.sampled_from(["ag", "ar"]), edits=st.lists(
    st.tuples(st.integers(0, 10**6), ENTRY_EDITS), max_size=3), meta=META)
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
    text = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
    usual = _usual(text)
    typed = typed_load.decode(text)
    if typed is not None:
        assert not isinstance(usual, str), usual  # it took a document the usual reader refuses
        fields, records = typed
        ours = _parse(fields, "f", [Transfer(*record) for record in records])
        assert ours.transfers == usual.transfers and ours.meta == usual.meta
        assert ours.chunk_bytes == usual.chunk_bytes and ours.collective == usual.collective
    elif not edits and meta in (None, {}, {"a": [1, 2.5]}):
        assert False, "an untouched document must be read the typed way"


def test_a_large_file_is_read_the_typed_way_and_gives_the_same_algorithm(tmp_path, monkeypatch):
    algorithm = ring_allreduce(40, 1e6)
    path = tmp_path / "ar.json"
    algorithm.save(path)
    calls = []
    real = typed_load.decode
    monkeypatch.setattr(typed_load, "decode", lambda text: calls.append(len(text)) or real(text))
    import workbench.model.algorithm_io as module
    monkeypatch.setattr(module, "TYPED_FROM_BYTES", 0)
    loaded = load_algorithm(path)
    assert calls and loaded.transfers == algorithm.transfers
    monkeypatch.setattr(module, "TYPED_FROM_BYTES", 1 << 40)
    assert load_algorithm(path).transfers == algorithm.transfers
