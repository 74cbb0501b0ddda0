import pytest

from workbench.bounds import cut_bound, flow_lp_bound, injection_bound, latency_bound, lower_bounds, tacos_ideal
from workbench.model.collective import make_collective
from workbench.kit.examples import ring_allgather, ring_allreduce
from workbench.checking.simulate import simulate
from workbench.topology import build

GiB = 2**30


def test_tacos_ideal_worked_example():
    # docs/methods/tacos.md 4.1: 5x5 mesh AG, 1 GiB, 50 GiB/s, alpha 0.5 us -> 9604 us
    topo = build("mesh:5x5", alpha=0.5e-6, bandwidth=50 * GiB)
    coll = make_collective("allgather", 25)
    assert tacos_ideal(topo, coll, GiB) == pytest.approx(9604e-6, rel=1e-6)


def test_ring_allgather_meets_the_injection_bound_on_a_unidirectional_ring():
    n, m = 8, 1e6
    algo = ring_allgather(n, m)
    bounds = lower_bounds(algo.topology, algo.collective, m)
    time = simulate(algo).collective_time
    assert bounds.injection == pytest.approx((n - 1) * m / 50e9 + 0.5e-6)
    assert bounds.best <= time * (1 + 1e-12)
    assert bounds.cut == pytest.approx(bounds.injection)


def test_latency_bound_is_the_alpha_diameter_whatever_the_chunk():
    topo = build("line:4", alpha=1e-6, bandwidth=1e9)
    coll = make_collective("broadcast", 4, 1, root=0)
    # no chunk serialisation: a schedule may cut the data finer, so only 0 bytes hold for every chunking
    assert latency_bound(topo, coll, 1e3) == pytest.approx(3e-6)
    assert latency_bound(topo, coll, 1e9) == latency_bound(topo, coll, 1e3)


def test_dgx1_allgather_cut_is_single_node():
    topo = build("dgx1", alpha=0.0, bandwidth=1.0)  # 1 B/s per NVLink: time in chunk units
    coll = make_collective("allgather", 8)
    # docs/methods/sccl.md section 4: b_l(Allgather) = 7/6 rounds per chunk at one chunk per NVLink per round
    assert cut_bound(topo, coll, 1.0) == pytest.approx(7 / 6)
    assert flow_lp_bound(topo, coll, 1.0) == pytest.approx(7 / 6, rel=1e-6)


def test_dgx1_alltoall_bisection():
    topo = build("dgx1", alpha=0.0, bandwidth=1.0)
    coll = make_collective("alltoall", 8)
    # 4 * 4 = 16 pieces must cross {0,1,2,3} -> {4..7} over 6 NVLinks: 16/6 chunk times
    assert cut_bound(topo, coll, 1.0) == pytest.approx(16 / 6)


def test_ring_alltoall_half_ring_cut():
    topo = build("ring:8", alpha=0.0, bandwidth=1.0)
    coll = make_collective("alltoall", 8)
    # 16 pieces cross into a half ring over 2 links
    assert cut_bound(topo, coll, 1.0) == pytest.approx(8.0)


def test_reduce_scatter_lp_uses_the_reversed_graph():
    topo = build("uniring:4", alpha=0.0, bandwidth=1.0)
    coll = make_collective("reducescatter", 4)
    assert flow_lp_bound(topo, coll, 1.0) == pytest.approx(3.0, rel=1e-6)
    assert injection_bound(topo, coll, 1.0) == pytest.approx(3.0)


def test_allreduce_has_no_lp_bound_but_valid_others():
    algo = ring_allreduce(6, 1e6)
    bounds = lower_bounds(algo.topology, algo.collective, algo.chunk_bytes)
    assert bounds.flow_lp is None
    assert bounds.best <= simulate(algo).collective_time
    assert bounds.ideal is not None


def test_cut_bound_skips_large_topologies():
    topo = build("torus:5x5")
    assert cut_bound(topo, make_collective("allgather", 25), 1e6) is None
