"""Lower bounds on fabrics whose switches reduce (NVLS, SHARP): the bounds whose proof counts deliveries
ending at NPUs are off there, the egress bound holds everywhere, and no bound reported on such a fabric is
above the simulated time of a verified in-network All-Reduce."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strategies import fabrics
from workbench.bounds import problem_bounds
from workbench.bounds.allreduce import gossip_bound
from workbench.bounds.egress import egress_bound, leaving_bandwidth
from workbench.bounds.group_gossip import group_gossip_bound
from workbench.bounds.two_hop import two_hop_bound
from workbench.checking.simulate import simulate
from workbench.checking.verify import verify
from workbench.kit.schedule import ScheduleBuilder
from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.registry import Problem, get_formulation
from workbench.run.bounds_cache import bounds_from_dict, bounds_to_dict, cache_key
from workbench.topology import Link, Topology, build
from workbench.topology.abilities import SwitchAbility

GiB = 2**30
MODELS = [dict(), dict(link_model="blocking"), dict(order="fifo"), dict(switch_model="store-and-forward")]
OFF_WHERE_SWITCHES_REDUCE = ("gossip", "group_gossip", "two_hop")
# every value a Bounds record reports as a lower bound (``ideal`` and ``rs_ag_throughput`` are not)
BOUNDS = ("injection", "latency", "cut", "flow_lp", "optimum", "splitting_cut", "gossip", "group_gossip", "two_hop",
          "egress", "alpha_beta", "best")


def _allreduce(topology: Topology, size: float = GiB, chunks: int = 1):
    collective = make_collective("allreduce", topology.num_npus, chunks)
    return collective, size / collective.num_chunks


def _reported(bounds) -> dict[str, float]:
    record = bounds.to_dict()
    return {key: record[key] for key in BOUNDS if record[key] is not None}


def nvls_allreduce(topology: Topology, chunks: int, size: float = GiB):
    """NVLS All-Reduce through the one reducing switch: every GPU reduces chunk c into the switch, its
    owner loads the sum and stores it back with a multicast to every other GPU; software-pipelined
    (reduces of chunk s, the load of s - 1, the store of s - 2, the multicast of s - 3) so that each
    link's file order keeps it busy."""
    (switch,) = topology.reducing_switches()
    n = topology.num_npus
    collective = make_collective("allreduce", n, chunks)
    b = ScheduleBuilder(topology, collective, collective.chunk_bytes(size))
    count = collective.num_chunks
    for s in range(count + 3):
        if s < count:
            for j in range(n):
                b.add(s, (s + j) % n, switch, "reduce")
        if 0 <= s - 1 < count:
            b.add(s - 1, switch, (s - 1) % n, "copy")  # load-reduce: the sum to one GPU
        if 0 <= s - 2 < count:
            b.add(s - 2, (s - 2) % n, switch, "copy")  # multicast store ...
        if 0 <= s - 3 < count:
            c = s - 3
            for j in range(1, n):
                b.add(c, switch, (c + j) % n, "copy")  # ... to every other GPU
    return b.build()


def sharp_allreduce(topology: Topology, chunks: int, size: float = GiB):
    """hgx:K,sharp: NVLS reduce in each box to the GPU on chunk c's rail, SHARP reduce of the boxes'
    sums in that rail's leaf (which sends the result back to every box: sum_fanout), then the NVLS
    multicast store in each box; software-pipelined like ``nvls_allreduce``, a wave of one chunk per
    rail at a time so that every NIC works."""
    cluster = topology.meta["cluster"]
    boxes, per_box = cluster["boxes"], cluster["gpus_per_box"]
    nvswitch, leaf = cluster["first_node"]["scale_up"], cluster["first_node"]["leaf"]
    collective = make_collective("allreduce", topology.num_npus, chunks)
    b = ScheduleBuilder(topology, collective, collective.chunk_bytes(size))
    count = collective.num_chunks
    waves = -(-count // per_box)
    for s in range(waves + 5):
        for stage, c in ((stage, (s - stage) * per_box + i) for stage in range(6) for i in range(per_box)):
            if not (0 <= s - stage and c < count):
                continue
            rail = c % per_box
            for box in range(boxes):
                gpu, switch = box * per_box + rail, nvswitch + box
                if stage == 0:
                    for j in range(per_box):
                        b.add(c, box * per_box + (rail + j) % per_box, switch, "reduce")
                elif stage == 1:
                    b.add(c, switch, gpu, "copy")
                elif stage == 2:
                    b.add(c, gpu, leaf + rail, "reduce")
                elif stage == 3:
                    b.add(c, leaf + rail, gpu, "copy")
                elif stage == 4:
                    b.add(c, gpu, switch, "copy")
                else:
                    for j in range(1, per_box):
                        b.add(c, switch, box * per_box + (rail + j) % per_box, "copy")
    return b.build()


def _check_below(bounds, algorithm) -> float:
    """Every reported bound is at most the algorithm's simulated time in every model; the fastest time."""
    verify(algorithm)
    reported = _reported(bounds)
    fastest = None
    for options in MODELS:
        time = simulate(algorithm, **options).collective_time
        fastest = time if fastest is None else min(fastest, time)
        above = {k: v for k, v in reported.items() if v > time * (1 + 1e-9)}
        assert not above, (algorithm.topology.name, options, time, above)
    return fastest


# ------------------------------------------------------------------ which bounds apply
@pytest.mark.parametrize("spec", ["hgx:1", "hgx:2,sharp", "nvl72", "hgx:1,rate=315GB/s"])
def test_the_bounds_that_count_deliveries_into_npus_are_off_where_switches_reduce(spec):
    topology = build(spec)
    collective, chunk = _allreduce(topology)
    bounds = problem_bounds(topology, collective, GiB, lp=False)
    for key in OFF_WHERE_SWITCHES_REDUCE:
        assert getattr(bounds, key) is None, key
    for key in ("injection", "latency", "splitting_cut", "egress"):
        assert getattr(bounds, key) is not None and getattr(bounds, key) > 0, key
    assert 0 < bounds.best < float("inf")


@pytest.mark.parametrize("spec", ["hgx:1,nvls=off", "nvl72:nvls=off", "hgx:2,nvls=off"])
def test_they_stay_on_the_same_links_without_reduction(spec):
    topology = build(spec)
    collective, chunk = _allreduce(topology)
    bounds = problem_bounds(topology, collective, GiB, lp=False)
    assert bounds.gossip is not None and bounds.two_hop is not None and bounds.egress is not None
    if spec != "nvl72:nvls=off":  # one switch: no partition into two groups that no switch joins
        assert bounds.group_gossip is not None


def test_a_box_private_nvswitch_keeps_the_box_gossip_bound():
    # hgx:4 without SHARP: each NVSwitch sums only what its own box's GPUs send, so the boxes are
    # still four gossiping parties over their 32 x 50 GB/s NICs; the flat gossip and two-hop are off
    topology = build("hgx:4")
    collective, chunk = _allreduce(topology)
    assert gossip_bound(topology, collective, chunk) is None
    assert two_hop_bound(topology, collective, chunk) is None
    assert group_gossip_bound(topology, collective, chunk) == pytest.approx(2 * 3 * GiB / (32 * 50e9) + 0.5e-6,
                                                                            rel=1e-9)
    # with SHARP every rail leaf sums what all four boxes send: no partition is left
    sharp = build("hgx:4,sharp")
    assert group_gossip_bound(sharp, *_allreduce(sharp)) is None


def test_the_disabled_gossip_bound_would_be_above_an_nvls_schedule():
    # why it is off: on hgx:1's links without reduction the gossip bound says 3.76 ms at 1 GiB, and
    # an NVLS All-Reduce on those links with a reducing switch takes less
    topology = build("hgx:1")
    collective, chunk = _allreduce(topology)
    plain = topology.with_abilities({})
    gossip = gossip_bound(plain, collective, chunk)
    assert gossip == pytest.approx(2 * 7 * GiB / (8 * 450e9 + 8 * 50e9) + 0.175e-6, rel=1e-9)
    algorithm = nvls_allreduce(topology, 16)
    verify(algorithm)
    assert simulate(algorithm).collective_time < gossip


# ------------------------------------------------------------------ the egress bound's values
def test_egress_on_hgx1_by_hand():
    # each GPU: 450 GB/s NVLink into the switch and a 50 GB/s NIC into a rail leaf that no other GPU
    # of a one-box fabric shares (a byte sent there can only come back), so B_L = 450 GB/s; every
    # other GPU is 0.175 + 0.175 us away through the NVSwitch
    topology = build("hgx:1")
    assert leaving_bandwidth(topology, 0) == 450e9
    collective, chunk = _allreduce(topology)
    expected = GiB / 450e9 + 0.35e-6
    assert egress_bound(topology, collective, chunk) == pytest.approx(expected, rel=1e-9)
    bounds = problem_bounds(topology, collective, GiB)
    assert bounds.egress == pytest.approx(expected, rel=1e-9)
    assert bounds.best == pytest.approx(expected, rel=1e-9)  # above the splitting cut's GiB / 450 GB/s + 0.175 us
    # the chunking does not change it
    four, chunk4 = _allreduce(topology, chunks=4)
    assert egress_bound(topology, four, chunk4) == pytest.approx(expected, rel=1e-9)


def test_egress_where_the_nic_leads_somewhere():
    # two boxes: the rail leaf reaches the other box's GPU, so the NIC counts (500 GB/s); the farthest
    # GPU is the other box's on another rail: NIC 0.5 + 0.5 us, NVLink 0.175 + 0.175 us
    topology = build("hgx:2")
    assert leaving_bandwidth(topology, 0) == 500e9
    collective, chunk = _allreduce(topology)
    assert egress_bound(topology, collective, chunk) == pytest.approx(GiB / 500e9 + 1.35e-6, rel=1e-9)
    nvl = build("nvl72")
    collective, chunk = _allreduce(nvl)
    assert egress_bound(nvl, collective, chunk) == pytest.approx(GiB / 900e9 + 0.35e-6, rel=1e-9)


def test_egress_pays_the_overheads_of_the_chain():
    topology = build("ring:4", overhead=1e-6)  # alpha 0.5 us, 50 GB/s per direction
    collective, chunk = _allreduce(topology, 1e6)
    # two links to the opposite NPU, each leaving an NPU: 2 x (alpha + overhead)
    a = topology.links[0].alpha
    expected = 1e6 / (2 * topology.links[0].bandwidth) + 2 * (a + 1e-6)
    assert egress_bound(topology, collective, chunk) == pytest.approx(expected, rel=1e-9)


def test_egress_of_a_reduce_scatter_counts_the_farthest_owners_first():
    # star of 4 NPUs, NPU 3 behind a far link (9 us against 1 us). NPU 0: its chunk for NPU 3 leaves
    # after 1 MB / B and travels 10 us (20 us), all three after 3 MB / B and travel 2 us (32 us);
    # NPU 3: every owner is 10 us away, 30 us + 10 us, the bound
    links = []
    for v, alpha in ((0, 1e-6), (1, 1e-6), (2, 1e-6), (3, 9e-6)):
        links += [Link(v, 4, alpha, 100e9), Link(4, v, alpha, 100e9)]
    topology = Topology.create(4, links, 1, "star")
    collective = make_collective("reducescatter", 4)
    chunk = 4e6 / collective.num_chunks
    value = egress_bound(topology, collective, chunk)
    from_3 = 3e6 / 100e9 + 10e-6  # NPU 3: every owner is 10 us away
    assert value == pytest.approx(from_3, rel=1e-9)
    assert egress_bound(topology, make_collective("allgather", 4), chunk) is None


# ------------------------------------------------------------------ never above a verified schedule
@pytest.mark.parametrize("spec, chunks", [("hgx:1", 1), ("hgx:1", 4), ("hgx:1", 16), ("hgx:1,rate=315GB/s", 4),
                                          ("nvl72", 1)])
def test_no_bound_is_above_an_nvls_allreduce(spec, chunks):
    topology = build(spec)
    collective, _ = _allreduce(topology)
    bounds = problem_bounds(topology, collective, GiB)
    fastest = _check_below(bounds, nvls_allreduce(topology, chunks))
    assert bounds.best <= fastest


def test_the_nvls_schedule_comes_close_to_the_bound():
    # 16 chunks per rank: within 16% of hgx:1's egress bound (the schedule sends 9/8 M per GPU link)
    topology = build("hgx:1")
    collective, _ = _allreduce(topology)
    bounds = problem_bounds(topology, collective, GiB)
    algorithm = nvls_allreduce(topology, 16)
    verify(algorithm)
    assert simulate(algorithm).collective_time <= bounds.best * 1.16


@pytest.mark.parametrize("chunks", [1, 4, 16])
def test_no_bound_is_above_a_sharp_allreduce(chunks):
    topology = build("hgx:2,sharp")
    collective, _ = _allreduce(topology)
    bounds = problem_bounds(topology, collective, GiB)
    assert bounds.alpha_beta is not None  # 16 NPUs: the time-expanded LP runs and must hold too
    fastest = _check_below(bounds, sharp_allreduce(topology, chunks))
    # the box's NICs (8 x 50 GB/s) carry M: the splitting cut, the best bound
    assert bounds.splitting_cut == pytest.approx(GiB / 400e9 + 0.5e-6, rel=1e-9) == bounds.best
    if chunks == 16:  # pipelined finely enough to come within 11% of it
        assert fastest <= bounds.best * 1.11


@pytest.mark.parametrize("chunks", [1, 4])
def test_no_reduce_scatter_bound_is_above_an_nvls_reduce_scatter(chunks):
    # the max-flow optimum (the All-Gather cut of the reversed graph: a switch that reduces is the
    # reversal of one that multicasts), the time-expanded LP, injection, latency and egress all hold
    topology = build("hgx:1")
    n, switch = topology.num_npus, topology.reducing_switches()[0]
    collective = make_collective("reducescatter", n, chunks)
    b = ScheduleBuilder(topology, collective, collective.chunk_bytes(GiB))
    for c in range(collective.num_chunks):
        for j in range(1, n + 1):
            b.add(c, (c + j) % n, switch, "reduce")
        b.add(c, switch, c % n, "copy")
    bounds = problem_bounds(topology, make_collective("reducescatter", n), GiB)
    assert bounds.optimum is not None and bounds.alpha_beta is not None
    _check_below(bounds, b.build())
    assert egress_bound(topology, collective, collective.chunk_bytes(GiB)) <= simulate(b.build()).collective_time


@pytest.mark.parametrize("spec, formulation", [("ring:4", "ring"), ("ring:8", "ring"), ("hgx:1,nvls=off", "ring"),
                                               ("switch:4", "direct")])
def test_a_plain_allreduce_still_meets_every_bound(spec, formulation):
    topology = build(spec)
    collective, _ = _allreduce(topology)
    result = call.synthesize(get_formulation(formulation), Problem(topology, collective, 1e6), time_limit=30,
                              seed=0)
    assert result.algorithms
    bounds = problem_bounds(topology, collective, 1e6)
    assert bounds.egress is not None
    _check_below(bounds, result.algorithms[0])


@st.composite
def reducing_stars(draw) -> Topology:
    """NPUs on one reducing switch (maybe rated, maybe with a slow extra ring between the NPUs)."""
    n = draw(st.integers(2, 6))
    bandwidth = draw(st.sampled_from([50e9, 100e9, 450e9]))
    alpha = draw(st.sampled_from([0.0, 0.2e-6, 1e-6]))
    links = [link for v in range(n) for link in (Link(v, n, alpha, bandwidth), Link(n, v, alpha, bandwidth))]
    if n > 2 and draw(st.booleans()):
        links += [Link(v, (v + 1) % n, 2 * alpha, bandwidth / 4) for v in range(n)]
    rate = draw(st.sampled_from([None, bandwidth / 2]))
    return Topology.create(n, links, 1, "reducing star", None, {n: SwitchAbility(reduce=True, reduce_rate=rate)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=reducing_stars(), chunks=st.integers(1, 3), size=st.sampled_from([4096, 65536, 1e6, 16e6]))
def test_no_bound_is_above_an_nvls_allreduce_on_any_star(topology, chunks, size):
    collective, _ = _allreduce(topology)
    bounds = problem_bounds(topology, collective, size, lp_time_limit=10)
    _check_below(bounds, nvls_allreduce(topology, chunks, size))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=fabrics(min_npus=2, max_npus=6), formulation=st.sampled_from(["ring", "direct", "rhd", "oneshot"]),
       size=st.sampled_from([4096, 65536, 1e6, 16e6]))
def test_egress_is_never_above_a_schedule_on_any_fabric(topology, formulation, size):
    collective, chunk = _allreduce(topology, size)
    result = call.synthesize(get_formulation(formulation), Problem(topology, collective, size), time_limit=20,
                              seed=0)
    assume(result.algorithms)
    algorithm = result.algorithms[0]
    verify(algorithm)
    bound = egress_bound(topology, collective, chunk)
    for options in MODELS:
        assert bound <= simulate(algorithm, **options).collective_time * (1 + 1e-9)


# ------------------------------------------------------------------ the record, the cache, the command
def test_the_cache_key_tells_a_reducing_switch_from_the_same_links():
    topology = build("hgx:1")
    collective = make_collective("allreduce", 8)
    options = {"lp": False}
    assert cache_key(topology, collective, GiB, options) != cache_key(topology.with_abilities({}), collective, GiB,
                                                                      options)
    assert cache_key(topology, collective, GiB, options) != cache_key(build("hgx:1,nvls=off"), collective, GiB,
                                                                      options)
    bounds = problem_bounds(topology, collective, GiB, lp=False)
    again = bounds_from_dict(bounds_to_dict(bounds))
    assert again is not None and again.to_dict() == bounds.to_dict() and again.egress == bounds.egress


def test_the_command_prints_egress_and_dashes_for_the_bounds_that_are_off(capsys):
    from workbench.cli import main

    assert main(["bounds", "--topology", "hgx:1", "--collective", "allreduce", "--size", "1GiB"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "farthest NPU" in lines["egress"] and "-" not in lines["egress"].split()[1]
    for key in OFF_WHERE_SWITCHES_REDUCE:
        assert lines[key].split()[1] == "-", lines[key]
