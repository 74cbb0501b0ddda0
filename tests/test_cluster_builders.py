"""Cluster builders (workbench.topology.clusters): rail-optimized GPU clusters, the k-ary fat tree and
the leaf-spine; counts with known answers, the wiring as properties, bad specs as one line, and the
size guard before anything is built."""

from __future__ import annotations

import json
import math
import re
import shlex
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from guards import deadline
from workbench.topology import builder_table
from workbench.util import size_guard
from workbench.cli import main
from workbench.cli.common import topology_from_args
from workbench.topology import BUILDERS, TopologyError, build, expand_per_npu, load_topology

DOCS = Path(__file__).resolve().parent.parent / "docs" / "clusters.md"
GB = 1e9

# spec -> (npus, switches, directed links)
COUNTS = {
    "rails:4x8": (32, 4 + 8, 2 * 32 + 2 * 32),
    "rails:64x8": (512, 64 + 16 + 8, 2 * 512 + 2 * 512 + 2 * 16 * 8),  # 2 groups of 32 boxes, 8 spines
    "rails:40x8,leaf=16,spines=4": (320, 40 + 24 + 4, 4 * 320 + 2 * 24 * 4),  # groups of 16, 16 and 8 boxes
    "rails:1x8": (8, 1 + 8, 4 * 8),
    "rails:3x1": (3, 3 + 1, 4 * 3),
    "fattree:4": (16, 8 + 8 + 4, 3 * 32),
    "fattree:2": (2, 2 + 2 + 1, 3 * 4),
    "leafspine:4x4x2": (16, 6, 2 * 16 + 2 * 4 * 2),
}


@pytest.mark.parametrize("spec", sorted(COUNTS))
def test_counts_of_known_clusters(spec):
    topology = build(spec)
    assert (topology.num_npus, topology.num_switches, len(topology.links)) == COUNTS[spec]
    estimate = builder_table.spec_size(spec)
    assert (estimate.npus, estimate.nodes, estimate.links) == (topology.num_npus, topology.num_nodes,
                                                               len(topology.links))


def _bandwidths(topology, src_nodes, dst_nodes) -> float:
    dst_nodes = set(dst_nodes)
    return sum(l.bandwidth for u in src_nodes for l in topology.out_links(u) if l.dst in dst_nodes)


def test_leaf_spine_bandwidth_and_oversubscription():
    plain, halved = build("rails:64x8"), build("rails:64x8,over=2")
    leaf, spine = 512 + 64, 512 + 64 + 16
    assert plain.link(leaf, spine).bandwidth == pytest.approx(32 * 50 * GB / 8)  # 200 GB/s
    assert halved.link(leaf, spine).bandwidth == pytest.approx(32 * 50 * GB / 16)
    assert halved.link(spine, leaf).bandwidth == pytest.approx(100 * GB)
    assert build("leafspine:4x4x2").link(16, 20).bandwidth == pytest.approx(100 * GB)
    assert build("leafspine:4x4x2,over=2").link(16, 20).bandwidth == pytest.approx(50 * GB)
    tree, thin = build("fattree:4"), build("fattree:4,over=2")
    assert {l.bandwidth for l in tree.links} == {50 * GB}
    assert sorted({l.bandwidth for l in thin.links}) == [25 * GB, 50 * GB]
    assert thin.link(0, 16).bandwidth == 50 * GB and thin.link(16, 24).bandwidth == 25 * GB  # host-edge kept


def test_the_last_smaller_group_gets_thinner_uplinks():
    topology = build("rails:40x8,leaf=16,spines=4")
    first_leaf, first_spine = 320 + 40, 320 + 40 + 24
    ups = [topology.link(first_leaf + g * 8, first_spine).bandwidth for g in range(3)]
    assert ups == pytest.approx([16 * 50 * GB / 4, 16 * 50 * GB / 4, 8 * 50 * GB / 4])
    assert topology.meta["cluster"]["group_boxes"] == [16, 16, 8]
    assert topology.meta["cluster"]["leaf_spine_bandwidth"] == pytest.approx([g * 50 * GB / 4 for g in (16, 16, 8)])


def test_node_ids_follow_the_documented_layout():
    topology = build("rails:4x8")
    gpu = 1 * 8 + 2  # box 1, local GPU 2
    assert topology.out_neighbors(gpu) == [32 + 1, 32 + 4 + 2]  # its box's NVSwitch, rail 2's leaf
    assert topology.out_neighbors(32 + 4 + 2) == [2, 10, 18, 26]
    big = build("rails:64x8")
    assert big.out_neighbors(40 * 8 + 3) == [512 + 40, 512 + 64 + 8 + 3]  # group 1, rail 3
    assert big.out_neighbors(512 + 64 + 16) == list(range(512 + 64, 512 + 64 + 16))  # a spine on every leaf
    tree = build("fattree:4")  # hosts 0..15, edge 16..23, aggregation 24..31, core 32..35
    assert tree.out_neighbors(5) == [18]  # pod 1, edge 0
    assert tree.out_neighbors(18) == [4, 5, 26, 27]
    assert tree.out_neighbors(32) == [24, 26, 28, 30]  # core 0: aggregation 0 of every pod
    assert tree.out_neighbors(35) == [25, 27, 29, 31]


def test_alpha_is_split_over_each_tier_and_paths_add_up():
    topology = build("rails:64x8")
    assert topology.link(0, 512).alpha == pytest.approx(0.175e-6)
    distances = topology.alpha_distances()
    assert distances[0][1] == pytest.approx(0.35e-6, rel=1e-6)  # same box, through the NVSwitch
    assert distances[0][8] == pytest.approx(1.0e-6, rel=1e-6)  # same rail and group, through the leaf
    assert distances[0][32 * 8] == pytest.approx(1.5e-6, rel=1e-6)  # same rail, other group: the spine
    tree = build("fattree:4", alpha=[2e-6, 1e-6, 0.4e-6], overhead=[0.1e-6, 0.2e-6, 0.3e-6])
    assert tree.link(0, 16).alpha == pytest.approx(1e-6) and tree.link(0, 16).overhead == pytest.approx(0.1e-6)
    assert tree.link(24, 32).alpha == pytest.approx(0.2e-6) and tree.link(24, 32).overhead == pytest.approx(0.3e-6)
    assert tree.alpha_distances()[0][15] == pytest.approx(2e-6 + 1e-6 + 0.4e-6, rel=1e-6)


def test_bandwidth_values_per_tier():
    two = build("rails:64x8", bandwidth=[900 * GB, 100 * GB])
    assert two.link(0, 512).bandwidth == 900 * GB and two.link(0, 512 + 64).bandwidth == 100 * GB
    assert two.link(512 + 64, 512 + 80).bandwidth == pytest.approx(32 * 100 * GB / 8)  # computed from the NIC
    one = build("rails:64x8", bandwidth=100 * GB)  # one value: scale-up and NIC, the spine tier computed
    assert one.link(0, 512).bandwidth == 100 * GB and one.link(512 + 64, 512 + 80).bandwidth == pytest.approx(400 * GB)
    three = build("rails:64x8", bandwidth=[900 * GB, 100 * GB, 10 * GB])
    assert three.link(512 + 64, 512 + 80).bandwidth == 10 * GB
    assert three.meta["cluster"]["leaf_spine_bandwidth_given"] is True
    assert build("leafspine:4x4x2", bandwidth=[50 * GB, 7 * GB]).link(16, 20).bandwidth == 7 * GB
    assert build("rails:4x8", bandwidth=[1 * GB, 2 * GB, 3 * GB]).meta["dim_bandwidth"] == [1 * GB, 2 * GB]


def test_meta_records_dims_tiers_and_every_parameter():
    meta = build("rails:64x8,over=2").meta
    assert meta["dims"] == [{"kind": "switch", "size": 8}, {"kind": "rail", "size": 64}]
    assert meta["dim_alpha"] == pytest.approx([0.35e-6, 1e-6, 0.5e-6])
    assert meta["dim_bandwidth"] == pytest.approx([450 * GB, 50 * GB, 100 * GB])
    cluster = meta["cluster"]
    assert {k: cluster[k] for k in ("family", "boxes", "gpus_per_box", "boxes_per_leaf", "leaf_groups", "leaves",
                                    "spines", "oversubscription")} == {
        "family": "rails", "boxes": 64, "gpus_per_box": 8, "boxes_per_leaf": 32, "leaf_groups": 2, "leaves": 16,
        "spines": 8, "oversubscription": 2.0}
    assert cluster["tiers"] == ["scale-up", "nic-leaf", "leaf-spine"]
    assert cluster["tier_bandwidth"]["leaf-spine"] == pytest.approx(100 * GB)
    flat = build("rails:4x8,spines=3,over=2").meta
    assert flat["cluster"]["spines"] == 0 and flat["cluster"]["oversubscription"] == 1.0  # no spine tier
    assert len(flat["dim_alpha"]) == len(flat["dim_bandwidth"]) == 2
    assert build("fattree:6").meta["dims"] == [{"kind": "switch", "size": 3}, {"kind": "pod_edge", "size": 3},
                                                {"kind": "pod", "size": 6}]
    assert build("leafspine:5x3x2").meta["dims"] == [{"kind": "switch", "size": 3}, {"kind": "leaves", "size": 5}]
    for spec in ("rails:64x8", "fattree:4", "leafspine:4x4x2", "rails:16x72"):
        topology = build(spec)
        json.dumps(topology.meta)  # plain data: a cell request carries it
        assert math.prod(d["size"] for d in topology.meta["dims"]) == topology.num_npus


def test_readers_of_dims_take_the_new_kinds_as_non_wrapping_switch_layouts():
    from workbench.kit.symmetry import is_vertex_transitive

    for spec in ("rails:4x8", "fattree:4", "leafspine:4x4x2"):
        assert not is_vertex_transitive(build(spec))  # switches: never read as a wrapping grid
    assert expand_per_npu("rails:4x8", [450 * GB, 50 * GB]) == [450 * GB, 50 * GB]  # a switch port: B as given


# ------------------------------------------------------------------ properties
@st.composite
def rails_specs(draw):
    boxes, gpus = draw(st.integers(1, 12)), draw(st.integers(1, 6))
    per_leaf, spines = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    over = draw(st.sampled_from([1, 1.5, 2, 4]))
    return boxes, gpus, per_leaf, spines, over, f"rails:{boxes}x{gpus},leaf={per_leaf},spines={spines},over={over}"


def _one_component(topology) -> bool:
    labels = topology.strong_components()
    return len({labels[u] for u in topology.npus}) == 1


@settings(max_examples=40, deadline=None)
@given(rails_specs())
def test_every_gpu_has_one_scale_up_and_one_nic_link_and_reaches_every_other(drawn):
    boxes, gpus, per_leaf, spines, over, spec = drawn
    topology = build(spec)
    n = boxes * gpus
    assert topology.num_npus == n
    first_leaf = n + boxes
    for gpu in topology.npus:
        box, rail = divmod(gpu, gpus)
        leaf = first_leaf + (box // per_leaf) * gpus + rail
        assert topology.out_neighbors(gpu) == [n + box, leaf]
        assert topology.in_neighbors(gpu) == [n + box, leaf]
    assert _one_component(topology)
    estimate = builder_table.spec_size(spec)
    assert (estimate.nodes, estimate.links) == (topology.num_nodes, len(topology.links))


@settings(max_examples=40, deadline=None)
@given(rails_specs())
def test_each_leaf_carries_its_downlinks_over_r_to_the_spines(drawn):
    boxes, gpus, per_leaf, spines, over, spec = drawn
    assume(boxes > per_leaf)  # a spine tier exists
    topology = build(spec)
    n = boxes * gpus
    first_leaf, first_spine = n + boxes, n + boxes + -(-boxes // per_leaf) * gpus
    assert topology.num_nodes == first_spine + spines
    for leaf in range(first_leaf, first_spine):
        down = _bandwidths(topology, [leaf], topology.npus)
        up = _bandwidths(topology, [leaf], range(first_spine, topology.num_nodes))
        back = _bandwidths(topology, range(first_spine, topology.num_nodes), [leaf])
        assert down > 0 and up == pytest.approx(down / over) and back == pytest.approx(up)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([2, 4, 6, 8]), st.sampled_from([1, 2, 3]))
def test_fat_tree_hosts_have_one_link_each_way_and_edges_carry_down_over_r(k, over):
    topology = build(f"fattree:{k},over={over}")
    half = k // 2
    n = k ** 3 // 4
    assert topology.num_npus == n and topology.num_switches == 5 * k * k // 4
    for host in topology.npus:
        edge = n + host // half
        assert topology.out_neighbors(host) == [edge] and topology.in_neighbors(host) == [edge]
    assert _one_component(topology)
    aggregation = range(n + k * half, n + k * k)
    for edge in range(n, n + k * half):
        down = _bandwidths(topology, [edge], topology.npus)
        assert _bandwidths(topology, [edge], aggregation) == pytest.approx(down / over)
    for core in range(n + k * k, topology.num_nodes):
        pods = [(agg - n - k * half) // half for agg in topology.out_neighbors(core)]
        assert sorted(pods) == list(range(k))  # one aggregation switch in every pod


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.sampled_from([1, 2, 2.5]))
def test_leaf_spine_leaves_carry_down_over_r(leaves, per_leaf, spines, over):
    topology = build(f"leafspine:{leaves}x{per_leaf}x{spines},over={over}")
    n = leaves * per_leaf
    assert _one_component(topology)
    for npu in topology.npus:
        assert topology.out_neighbors(npu) == [n + npu // per_leaf]
    for leaf in range(n, n + leaves):
        down = _bandwidths(topology, [leaf], topology.npus)
        assert _bandwidths(topology, [leaf], range(n + leaves, n + leaves + spines)) == pytest.approx(down / over)


# ------------------------------------------------------------------ bad input and the size guard
@pytest.mark.parametrize("spec, field", [
    ("rails:0x8", "boxes (B)"),
    ("rails:4x0", "GPUs per box (G)"),
    ("rails:4x8,leaf=0", "leaf"),
    ("rails:4x8,colour=3", "colour"),
    ("rails:4x8,over=-1", "over"),
    ("rails:4x8,over=0.5", "over"),
    ("rails:4x8,spines=two", "spines"),
    ("rails:4x8,leaf", "leaf"),
    ("rails:4x8,leaf=2,leaf=3", "leaf"),
    ("rails:4", "rails:BxG"),
    ("fattree:5", "K (ports per switch)"),
    ("fattree:4,leaf=2", "leaf"),
    ("leafspine:4x4", "leafspine:LxPxS"),
    ("leafspine:4x0x2", "NPUs per leaf (P)"),
])
def test_bad_specs_are_one_line_naming_spec_and_field(spec, field):
    with pytest.raises(TopologyError) as caught:
        load_topology(spec)
    message = str(caught.value)
    assert "\n" not in message and repr(spec) in message and field in message, message


@pytest.mark.parametrize("spec, kwargs, fragment", [
    ("rails:64x8", {"alpha": [1e-6] * 4}, "--alpha: expected 1 to 3"),
    ("fattree:4", {"bandwidth": [1e9, 2e9]}, "--bandwidth: expected 1 or 3"),
    ("rails:4x8", {"bandwidth": [1e9, -1.0]}, "nic-leaf tier must be positive"),
    ("leafspine:2x2x2", {"overhead": [-1e-6]}, "npu-leaf tier must be non-negative"),
])
def test_bad_tier_values_name_the_tier(spec, kwargs, fragment):
    with pytest.raises(TopologyError, match=re.escape(fragment)):
        build(spec, **kwargs)


@pytest.mark.parametrize("spec", ["rails:1000000x8", "rails:100000x8", "fattree:1000", "leafspine:100000x100x100",
                                  "rails:4x8,leaf=1,spines=100000000000"])
def test_the_size_guard_refuses_huge_clusters_before_building(spec):
    tracemalloc.start()
    try:
        with deadline(30.0), pytest.raises(TopologyError, match="needs an estimated"):
            load_topology(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6, peak  # nothing built: a million-NPU fabric's links alone are gigabytes


def test_an_experiment_config_refuses_a_huge_cluster_in_one_line():
    from workbench.config.checks import ConfigError
    from workbench.config.experiment import parse_experiment

    grid = {"collectives": ["allgather"], "sizes": ["1MB"], "formulations": ["ring"]}
    tracemalloc.start()
    try:
        with deadline(30.0), pytest.raises(ConfigError) as caught:
            parse_experiment({"name": "big", "grid": {"topologies": ["rails:1000000x8"], **grid}}, "big.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6, peak  # refused before the fabric is built
    message = str(caught.value)
    assert "\n" not in message and "grid.topologies[0]" in message and "needs an estimated" in message
    with pytest.raises(ConfigError, match=re.escape("grid.topologies[0]") + ".*colour"):
        parse_experiment({"name": "bad", "grid": {"topologies": ["rails:4x8,colour=3"], **grid}}, "bad.yaml")
    experiment = parse_experiment({"name": "ok", "grid": {"topologies": ["rails:4x8", "fattree:4"], **grid}}, "ok.yaml")
    assert [t.label for t in experiment.topologies] == ["rails:4x8", "fattree:4"]


# ------------------------------------------------------------------ listing and docs
def test_builders_lists_each_cluster_spec_on_one_line(capsys):
    assert main(["builders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for spec in ("rails:BxG[,leaf=L][,spines=S][,over=R]", "fattree:K[,over=R]", "leafspine:LxPxS[,over=R]"):
        assert spec in BUILDERS
        assert sum(1 for line in lines if line.startswith(spec + " ")) == 1


def test_the_docs_examples_parse():
    text = DOCS.read_text()
    specs = set(re.findall(r"\b((?:rails|fattree|leafspine):[0-9][^\s`|]*)", text))
    assert {"rails:64x8", "fattree:4", "leafspine:4x4x2", "rails:16x72"} <= specs
    for spec in specs:
        estimate = builder_table.spec_size(spec)
        assert estimate is not None, spec
        if estimate.nodes <= 5000:
            assert load_topology(spec).num_nodes == estimate.nodes, spec
        else:
            with pytest.raises(TopologyError, match="needs an estimated"):
                load_topology(spec)
    commands = [line.split("#")[0] for line in text.splitlines() if line.startswith("workbench topology ")]
    assert len(commands) >= 5
    for command in commands:
        words = shlex.split(command)[2:]
        options = dict(zip(words[1::2], words[2::2]))
        topology = topology_from_args(words[0], options.get("--alpha"), options.get("--bandwidth"))
        assert topology.num_npus >= 2, command
