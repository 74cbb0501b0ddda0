"""The size guard: estimates from a request's numbers, refusals before anything is built."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from guards import deadline
from workbench.topology import builder_table
from workbench.util import size_guard
from workbench.cli import main
from workbench.topology import build

SPECS = st.one_of(
    st.builds(lambda n: f"ring:{n}", st.integers(2, 40)),
    st.builds(lambda n: f"uniring:{n}", st.integers(2, 40)),
    st.builds(lambda n: f"line:{n}", st.integers(2, 40)),
    st.builds(lambda n: f"fc:{n}", st.integers(2, 12)),
    st.builds(lambda a, b: f"mesh:{a}x{b}", st.integers(1, 8), st.integers(2, 8)),
    st.builds(lambda a, b, c: f"torus:{a}x{b}x{c}", st.integers(1, 4), st.integers(2, 4), st.integers(2, 4)),
    st.builds(lambda n: f"switch:{n}", st.integers(2, 20)),
    st.builds(lambda n, d: f"switch:{n}@{d}", st.integers(3, 20), st.integers(1, 2)),
    st.builds(lambda a, b, c: f"md:R{a},F{b},S{c}", st.integers(2, 4), st.integers(2, 4), st.integers(2, 4)),
    st.builds(lambda a, b, c: f"rfs:{a}x{b}x{c}", st.integers(2, 4), st.integers(2, 4), st.integers(2, 3)),
    st.builds(lambda a, g: f"dragonfly:{a}x{g}", st.integers(2, 5), st.integers(2, 6)),
    st.builds(lambda kind, k: f"{kind}:{k}", st.sampled_from(["ndv2", "dgx2", "ndv2-nic", "dgx2-nic", "amd",
                                                               "nvs-ib"]), st.integers(1, 5)),
)


@settings(max_examples=60, deadline=None)
@given(SPECS)
def test_the_estimate_bounds_the_built_topology_from_above(spec):
    estimate = builder_table.spec_size(spec)
    topology = build(spec)
    assert estimate is not None
    assert estimate.nodes >= topology.num_nodes and estimate.links >= len(topology.links), spec


def test_unknown_specs_are_left_to_the_builder():
    assert builder_table.spec_size("nosuch:4") is None
    assert builder_table.spec_size("dgx1") is None  # a fixed 8-GPU box needs no estimate


@pytest.mark.parametrize("argv, fragment", [
    (["topology", "ring:100000000"], "ring:100000000: needs an estimated"),
    (["topology", "mesh:100000x100000"], "mesh:100000x100000: needs an estimated"),
    (["topology", "ring:8", "--max-memory", "10KB"], "over the 10 KB budget"),
    (["synth", "ring", "--topology", "ring:8", "--collective", "allgather", "--chunks", "100000000",
      "--size", "1MB", "-o", "{out}"], "--chunks 100000000 on ring:8: needs an estimated"),
    (["bounds", "--topology", "torus:3000x3000", "--collective", "allgather", "--size", "1GB"],
     "torus:3000x3000: needs an estimated"),
])
def test_oversized_requests_are_refused_at_once(tmp_path, capsys, argv, fragment):
    out = tmp_path / "a.json"
    with deadline(30.0):  # refused before building, not after minutes of growth
        assert main([w.format(out=out) for w in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0] and "budget" in err[0], err
    assert not out.exists()


def test_max_memory_lets_a_request_through(tmp_path, capsys):
    assert main(["topology", "ring:8", "--max-memory", "10KB"]) == 2
    capsys.readouterr()
    assert main(["topology", "ring:8", "--max-memory", "1GB"]) == 0


def test_a_grid_that_cannot_fit_exits_2_before_any_cell(tmp_path, capsys):
    config = tmp_path / "big.yaml"
    config.write_text("name: big\ngrid:\n  topologies: [ring:8]\n  collectives: [allgather]\n"
                      "  chunks: [1, 100000000]\n  sizes: [1MB]\n  formulations: [ring]\n")
    results = tmp_path / "results"
    assert main(["run", str(config), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grid.topologies[0]: ring:8 with 100000000 chunks per rank needs" in err[0], err
    assert not results.exists()
