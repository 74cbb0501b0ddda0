"""What a switch does besides forwarding: multicast, and summing (NVLink SHARP, InfiniBand SHARP).

Every switch forwards. Two abilities are declared per switch node of the ``{nodes, links}``
document (docs/cost-model.md, "Switches that reduce"), each absent field keeping the meaning every
topology had before the fields existed:

* ``multicast`` (default true): the switch may send one value it holds to several destinations
  (NVLS's multicast store, an IB multicast group). ``false``: every value it holds leaves at most
  once; the verifier refuses a fan-out there.
* ``reduce`` (default false): NPUs (or switches below it) may ``reduce`` into the switch, which
  sums what arrives for one operation and sends the sum on. Without it a reduce into the switch is
  refused.
* ``reduce_rate`` (bytes/s, optional): how fast one port of the switch streams a sum's inputs in
  and the sum out; a reduce into the switch and the sum leaving it hold their links at
  ``min(link bandwidth, reduce_rate)``. Absent: the links' own rates. This is a simulator
  parameter of the hardware, not NCCL's tuning factor.
* ``sum_fanout`` (default false): whether a sum the switch made may leave it for more than one
  destination. An NVSwitch load-reduce returns the sum to the one GPU that issued it (which then
  stores it to every GPU with a multicast); a SHARP switch sends its result down the aggregation
  tree to every member.
* ``reduce_trees`` (optional): how many reduction trees (distinct sets of inputs summed toward one
  output) the switch runs at once; SHARP switches run 2. The verifier refuses a schedule that keeps
  more open at once on the default timeline.

``SwitchAbility`` holds one switch's fields; ``abilities_from_nodes`` reads them from the document's
node list and ``ability_fields`` writes the non-default ones back.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from workbench.topology.link import TopologyError

__all__ = ["SwitchAbility", "FORWARDING", "ability_fields", "abilities_from_nodes", "ABILITY_KEYS"]


@dataclass(frozen=True)
class SwitchAbility:
    """One switch's abilities (module docstring); the defaults are a plain multicasting switch."""

    multicast: bool = True
    reduce: bool = False
    reduce_rate: float | None = None
    sum_fanout: bool = False
    reduce_trees: int | None = None

    def __post_init__(self) -> None:
        if not self.reduce and (self.reduce_rate is not None or self.sum_fanout or self.reduce_trees is not None):
            raise TopologyError("reduce_rate, sum_fanout and reduce_trees need reduce: true")
        if self.reduce_rate is not None and not self.reduce_rate > 0:
            raise TopologyError(f"reduce_rate must be positive, got {self.reduce_rate!r}")
        if self.reduce_trees is not None and self.reduce_trees < 1:
            raise TopologyError(f"reduce_trees must be at least 1, got {self.reduce_trees!r}")


FORWARDING = SwitchAbility()
ABILITY_KEYS = tuple(f.name for f in fields(SwitchAbility))


def ability_fields(ability: SwitchAbility) -> dict[str, Any]:
    """The fields of ``ability`` that differ from a plain switch's, for a document's node entry."""
    return {key: getattr(ability, key) for key in ABILITY_KEYS if getattr(ability, key) != getattr(FORWARDING, key)}


def abilities_from_nodes(nodes: list, kinds: dict[int, str], source: str) -> dict[int, SwitchAbility]:
    """Switch id -> its declared abilities, for the node entries that declare any; a field on an
    NPU, a wrong type or a value out of range is a ``TopologyError`` naming the node and field."""
    from workbench.util.safe_load import boolean, number
    from workbench.util.units import UnitError, parse_bandwidth

    found: dict[int, SwitchAbility] = {}
    for i, node in enumerate(nodes):
        declared = [key for key in ABILITY_KEYS if key in node]
        if not declared:
            continue
        where = f"{source}: nodes[{i}]"
        if kinds[node["id"]] != "switch":
            raise TopologyError(f"{where}.{declared[0]}: only a switch node declares what it does")
        values: dict[str, Any] = {}
        for key in ("multicast", "reduce", "sum_fanout"):
            if key in node:
                values[key] = boolean(node[key], f"{where}.{key}", TopologyError)
        if "reduce_rate" in node:
            try:
                values["reduce_rate"] = parse_bandwidth(node["reduce_rate"])
            except UnitError as exc:
                raise TopologyError(f"{where}.reduce_rate: {exc}") from None
        if "reduce_trees" in node:
            values["reduce_trees"] = int(number(node["reduce_trees"], f"{where}.reduce_trees", TopologyError,
                                                minimum=1, integer=True))
        try:
            found[node["id"]] = SwitchAbility(**values)
        except TopologyError as exc:
            raise TopologyError(f"{where}: {exc}") from None
    return found
