"""Large-file JSON: orjson or the standard library give the same algorithm; the fast transfer path
reads exactly what the checked path reads, and every malformed entry still gets its own message."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.util import fastjson
from workbench.model.algorithm import AlgorithmFormatError, load_algorithm
from workbench.model.algorithm_format import _parse_transfer, _parse_transfers
from workbench.kit.examples import ring_allreduce

_times = st.one_of(st.none(), st.integers(0, 10**6), st.floats(0, 1, allow_nan=False))
_entries = st.fixed_dictionaries(
    {"id": st.integers(0, 10**6), "src": st.integers(0, 64), "dst": st.integers(0, 64)},
    optional={"chunk": st.integers(0, 100), "op": st.sampled_from(["copy", "reduce"]),
              "deps": st.lists(st.integers(0, 100), max_size=4), "t_start": _times, "t_end": _times})


@settings(max_examples=200, deadline=None)
@given(st.lists(_entries, min_size=1, max_size=20), st.booleans())
def test_fast_path_reads_what_the_checked_path_reads(entries, as_list):
    for entry in entries:
        entry.setdefault("chunk", 0)
        if entry.get("t_start") is not None and entry.get("t_end") is not None:  # a claim ends after it starts
            entry["t_start"], entry["t_end"] = sorted((entry["t_start"], entry["t_end"]))
        if as_list:  # the multi-chunk form goes through the checked path
            entry["chunks"] = [entry.pop("chunk"), 7]
    assert _parse_transfers(entries, "x") == [_parse_transfer(e, i, "x") for i, e in enumerate(entries)]


@pytest.mark.parametrize("entry,message", [
    ({"id": True, "chunk": 0, "src": 0, "dst": 1}, r"transfers\[1\]\.id: expected an integer"),
    ({"id": 1, "chunk": 0, "src": 0, "dst": 1, "op": "add"}, r"transfers\[1\]\.op"),
    ({"id": 1, "chunk": 0, "src": 0, "dst": 1, "deps": [1.5]}, r"transfers\[1\]\.deps"),
    ({"id": 1, "chunk": 0, "chunks": [1], "src": 0, "dst": 1}, "either 'chunk' or 'chunks'"),
    ({"id": 1, "src": 0, "dst": 1}, "missing field 'chunk'"),
    ({"id": 1, "chunk": 0, "src": 0, "dst": 1, "t_end": "soon"}, r"transfers\[1\]\.t_end"),
    ([1, 2], r"transfers\[1\]: expected an object"),
])
def test_malformed_entries_keep_their_messages(entry, message):
    good = {"id": 0, "chunk": 0, "src": 0, "dst": 1}
    with pytest.raises(AlgorithmFormatError, match=message):
        _parse_transfers([good, entry], "file.json")


@pytest.fixture(params=["orjson", "json"])
def engine(request, monkeypatch):
    """Each test once per JSON engine (orjson only where it is installed)."""
    if request.param == "orjson" and fastjson._orjson is None:
        pytest.skip("orjson is not installed")
    monkeypatch.setattr(fastjson, "ENGINE", request.param)
    return request.param


def test_both_engines_round_trip_an_algorithm(tmp_path, engine):
    algorithm = ring_allreduce(6, 1e6)
    path = tmp_path / "ar.json"
    algorithm.save(path)
    assert json.loads(path.read_text())["format"] == "workbench.algorithm/1"  # plain JSON on disk
    loaded = load_algorithm(path)
    assert loaded.transfers == algorithm.transfers
    assert loaded.chunk_bytes == algorithm.chunk_bytes
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "workbench.algorithm/1",\n "transfers": [1,,2]}')
    with pytest.raises(AlgorithmFormatError, match=r"not valid JSON \(line 2"):
        load_algorithm(broken)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UnicodeDecodeError):  # the CLI names it "not a text file"
        load_algorithm(binary)


def test_numpy_scalars_survive_a_round_trip_and_infinities_are_written_as_null(tmp_path, engine):
    import numpy as np

    algorithm = ring_allreduce(4, 1e6)
    algorithm.meta.update(big_m=np.float64(2.5), count=np.int64(3), nested={"1": [np.float32(0.5)]})
    algorithm.save(tmp_path / "numpy.json")
    meta = load_algorithm(tmp_path / "numpy.json").meta
    assert (meta["big_m"], meta["count"], meta["nested"]) == (2.5, 3, {"1": [0.5]})
    algorithm.meta["gap"] = float("inf")
    algorithm.save(tmp_path / "inf.json")
    assert "Infinity" not in (tmp_path / "inf.json").read_text()  # standard JSON only
    assert load_algorithm(tmp_path / "inf.json").meta["gap"] is None
