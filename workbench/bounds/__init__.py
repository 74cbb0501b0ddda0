"""Lower bounds on collective time, the exact optima where they exist, and TACOS's "Ideal" under its own name.

Valid bounds (no algorithm timed by the simulator, in any of its models, can beat them); each
says the assumption it rests on. Switches that reduce (NVLS, SHARP: ``workbench.topology.abilities``)
void only the All-Reduce bounds that count deliveries ending at NPUs (``gossip``, ``group_gossip``,
``two_hop``), which are then None; every other bound is an information or flow argument that does
not ask where values are summed (docs/bounds.md, "Switches that reduce"):

* ``injection``: every rank must receive (send) the bytes of every chunk it needs (each of its
  contributions someone else needs); its in-links (out-links) serialise those bytes, and the last
  one still pays the smallest alpha of those links. Chunk count times chunk bytes is the bytes
  themselves, so the value is the same for every chunking of the problem.
* ``latency``: a needed byte travels at least the alpha-shortest path from its (nearest, for
  copies; every, for reductions) holder. No serialisation term: a schedule may cut its data into
  pieces as small as it likes, so the only piece every chunking must send is of 0 bytes. With
  per-message overheads the path also pays, per segment, its first link's overhead (every
  message occupies its links for at least that before it arrives: ``Topology.message_distances``).
* ``cut``: for every node subset A (small topologies), the chunks that must enter A cross links
  into A: ``need(A) * chunk / cap(A)`` plus the smallest alpha of those links (docs/methods/sccl.md section 4).
* ``optimum``: the exact throughput optimum by max-flow (``workbench.bounds.optimum``), plus the smallest
  alpha of the maximising cut's links. All-Gather ``(M/N) max_S |S∩C|/B+(S)`` (ForestColl,
  arXiv 2402.06787), Reduce-Scatter the same on the reversed graph, broadcast ``M / min_v
  maxflow(root, v)`` and reduce reversed, scatter ``(M/N) max_{S∋root} |C - S|/B+(S)`` and gather
  reversed. Exact in the bandwidth term: pipelined tree packing reaches it.
* ``flow_lp``: the multi-commodity-flow LP (``workbench.bounds.flow_lp``) for All-to-All (exact: the
  max-concurrent flow) and custom demands (a relaxation); it has no self-sustaining cycles.
* All-Reduce (no exact optimum is known on general fabrics):
  ``splitting_cut``: any fabric, any algorithm: every output byte outside a set S of NPUs depends
  on inputs inside it, so M bytes cross every cut that splits the NPUs, in both directions:
  ``M / min_S min(B+(S), B-(S))`` (+ the cut's smallest alpha);
  ``egress``: every byte of NPU u's input must leave u, and the last of those on their way to the
  farthest NPU still travels there: ``max_u M / B_L(u) + max_w d(u, w)`` (``B_L(u)``: u's out-links
  from which another NPU is reachable without u; ``d``: the message distance, overheads included);
  valid on every fabric, reducing switches or not (``workbench.bounds.egress``; the proof is
  docs/bounds.md, "The egress bound");
  ``gossip``: every byte position needs at least ``2(N-1)`` one-way transmissions between NPUs
  (the one-way gossip minimum), each *ending* at an NPU over one of its in-links, so
  ``2(N-1) M / (sum over NPUs of their in-link bandwidths)`` (+ the smallest alpha of those links);
  without switches that sum is every link. Valid while no switch sums what two NPUs send (None
  where one does): an in-network reduction would need only one delivery per NPU. The
  out-link form (each transmission *starts* at an NPU) would need switches that do not copy either,
  and here they may: a chunk sent into a switch can leave it for several NPUs, so one NPU send can
  serve many (``gossip_bound``).
  ``group_gossip``: the same with groups of NPUs (boxes, leaf groups, found from the links) as the
  parties: ``2(g-1) M`` over the bandwidth of the links entering the groups' NPUs from outside
  (``group_gossip``); a partition counts only where no reducing switch is reached by two of its
  groups (a box's own NVSwitch is part of the box).
  ``two_hop``: each rank u's contribution reaches an NPU v raw (M bytes through v's in-links) or
  inside a sum, which needs two deliveries in a row (no sooner than ``c_u(v)``): with ``c`` sorted
  decreasing, ``max_v min_j max(c_{j+1}(v), j M / B_in(v) + a(v))`` (``two_hop``); None on a
  fabric with a reducing switch.
  ``rs_ag_throughput`` = RS* + AG* (the two throughput optima in sequence) is reported beside
  them: a throughput figure, *not* a bound and not a time known to be reached (at small sizes it
  lies below the bounds).

``best`` is the largest valid bound. ``problem_bounds`` is the yardstick of a problem (topology,
collective, size): the bounds of the collective without its chunking, so every schedule of the
problem is measured against the same ``best`` whatever its chunk size. ``exact`` (label
"optimum") says ``best`` is proven to be the optimum in the simulator's model at this size, which
only a schedule that meets it shows (``schedule_time``): the max-flow ``optimum`` is exact in the
bandwidth term alone, and where alpha or finite chunks matter nothing proves any schedule reaches
it, so on its own it is labelled "bound".

Per-message overhead (docs/cost-model.md): every message occupies a link for at least the smallest
overhead, so each bound adds that once (the smallest of the rank's links for ``injection``, of all
links elsewhere) beside its alpha; it counts once per bound, not per chunk, and is 0 on fabrics
without overhead. ``latency``, ``two_hop`` and ``egress`` take it inside their message distances
(every segment leaving an NPU pays its first link's overhead), which is at least that once.

``ideal`` is TACOS's metric: ``size * factor / min_N BW_N + diameter`` (docs/methods/tacos.md 4.1). It is
*not* valid under pipelining, so ``best`` never uses it; ``efficiency`` uses ``best``.

Where each lives: the ``Bounds`` record in ``record``; ``injection``, ``latency``, ``cuts`` (the
enumerated and sweep cuts), ``optimum_bound`` (the max-flow optimum in seconds; the optima
themselves in ``optimum``), ``flow_lp``, ``allreduce`` (``splitting_cut``, ``gossip``,
``group_gossip``, ``two_hop``, ``egress``, ``rs_ag_throughput``), ``group_gossip``, ``two_hop``,
``egress``, ``group_cuts``, ``alpha_beta`` and ``ideal`` one module each; ``problem`` puts them
together (``lower_bounds``, ``problem_bounds``). This package offers them all under one name.
"""


from workbench.bounds.allreduce import allreduce_bounds, gossip_bound
from workbench.bounds.cuts import alltoall_cut_bound, cut_bound
from workbench.bounds.egress import egress_bound
from workbench.bounds.flow_lp import flow_lp_bound
from workbench.bounds.ideal import ideal_factor, tacos_ideal
from workbench.bounds.injection import injection_bound
from workbench.bounds.latency import latency_bound
from workbench.bounds.optimum_bound import optimum_bound
from workbench.bounds.problem import lower_bounds, lp_seconds_within, problem_bounds, unchunked
from workbench.bounds.record import TIGHT, Bounds

__all__ = [
    "Bounds",
    "TIGHT",
    "lower_bounds",
    "problem_bounds",
    "unchunked",
    "lp_seconds_within",
    "injection_bound",
    "latency_bound",
    "cut_bound",
    "alltoall_cut_bound",
    "flow_lp_bound",
    "optimum_bound",
    "allreduce_bounds",
    "gossip_bound",
    "egress_bound",
    "tacos_ideal",
    "ideal_factor",
]
