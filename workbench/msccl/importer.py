"""MSCCL XML in: every matched send and receive of a run becomes a transfer."""

from __future__ import annotations

from workbench.model.algorithm import Algorithm, Transfer
from workbench.msccl.common import MscclError
from workbench.msccl.parse import parse_xml
from workbench.msccl.run import check_races, collective_of, initial_buffers, run_xml
from workbench.topology import Topology

__all__ = ["import_xml"]


def import_xml(text: str, topology: Topology, size_bytes: float, source: str = "xml",
               root: int | None = None) -> Algorithm:
    """An MSCCL XML as a workbench algorithm on ``topology`` (plan order from ``wbid`` when present)."""
    algo = parse_xml(text, source)
    collective = collective_of(algo, root)
    if topology.num_npus < collective.num_ranks:
        raise MscclError(f"{source}: {collective.num_ranks} ranks but the topology has {topology.num_npus} NPUs")
    check_races(algo, source)  # a racy file has no single meaning to import
    result = run_xml(algo, initial_buffers(collective), source)
    records = result.transfers
    if all(r["wbid"] is not None for r in records):
        order = sorted(range(len(records)), key=lambda i: (records[i]["wbid"], i))
    else:
        order = list(range(len(records)))
    new_id = {old: new for new, old in enumerate(order)}
    transfers = []
    for new, old in enumerate(order):
        r = records[old]
        deps = tuple(sorted(new_id[d] for d in r["deps"] if new_id[d] < new))
        transfers.append(Transfer(new, tuple(r["chunks"]), r["src"], r["dst"], r["op"], deps))
    meta = {"formulation": "msccl-import", "source": source, "xml_name": algo.attrs.get("name")}
    return Algorithm(topology, collective, collective.chunk_bytes(size_bytes), transfers, meta)
