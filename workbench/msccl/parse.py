"""Reading an MSCCL XML file into threadblocks and steps."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from workbench.msccl.common import MscclError

__all__ = ["XmlStep", "XmlTb", "XmlAlgo", "parse_xml"]


@dataclass
class XmlStep:
    rank: int
    tb: int
    index: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    wbid: int | None
    wbid_send: int | None = None


@dataclass
class XmlTb:
    rank: int
    id: int
    send: int
    recv: int
    chan: int
    steps: list[XmlStep]


@dataclass
class XmlAlgo:
    attrs: dict[str, str]
    ngpus: int
    coll: str
    nchunksperloop: int
    buffers: dict[int, dict[str, int]]
    tbs: dict[int, dict[int, XmlTb]]

    @property
    def in_place(self) -> bool:
        """Checked as in-place only when the file says it is for in-place calls alone (``inplace="1"``
        and not ``outofplace="1"``); a file valid for both is checked out of place."""
        return self.attrs.get("inplace") == "1" and self.attrs.get("outofplace") != "1"

    def slot(self, rank: int, buf: str, off: int) -> tuple[str, int]:
        """The buffer slot a (buf, off) names. In place, NCCL passes one buffer as both: All-Reduce,
        All-to-All, broadcast and reduce use it whole (o[x] is i[x]); All-Gather's input is the rank's
        block of the output (i[j] is o[r*k + j]); Reduce-Scatter's output is the rank's block of the
        input (o[j] is i[r*k + j])."""
        if not self.in_place:
            return buf, off
        kind = {"reduce_scatter": "reducescatter"}.get(self.coll, self.coll)
        k = max(self.nchunksperloop // max(self.ngpus, 1), 1)
        if kind in ("allgather", "gather"):
            return ("o", rank * k + off) if buf == "i" else (buf, off)
        if kind in ("reducescatter", "scatter"):
            return ("i", rank * k + off) if buf == "o" else (buf, off)
        return ("i", off) if buf == "o" else (buf, off)

    def limit(self, rank: int, buf: str) -> int:
        """Chunks in the buffer a slot of ``slot`` lives in (an aliased buffer's extent included)."""
        declared = self.buffers[rank]
        size = declared.get(buf, 0)
        for other in ("i", "o"):
            if other != buf and declared.get(other, 0):
                alias, start = self.slot(rank, other, 0)
                if alias == buf:
                    size = max(size, start + declared[other])
        return size


def parse_xml(text: str, source: str = "xml") -> XmlAlgo:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MscclError(f"{source}: not well-formed XML ({exc})") from None
    if root.tag != "algo":
        raise MscclError(f"{source}: the root element must be <algo>, got <{root.tag}>")

    def number(element, key: str, where: str) -> int:
        value = element.get(key)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise MscclError(f"{source}: {where}: attribute {key}={value!r} must be an integer") from None

    ngpus = number(root, "ngpus", "<algo>")
    algo = XmlAlgo(dict(root.attrib), ngpus, root.get("coll", ""), number(root, "nchunksperloop", "<algo>"), {}, {})
    for gpu in root.findall("gpu"):
        rank = number(gpu, "id", "<gpu>")
        algo.buffers[rank] = {b: number(gpu, f"{b}_chunks", f"gpu {rank}") for b in ("i", "o", "s")}
        algo.tbs[rank] = {}
        for tb in gpu.findall("tb"):
            tb_id = number(tb, "id", f"gpu {rank} <tb>")
            where = f"rank {rank} tb {tb_id}"
            steps = []
            for step in tb.findall("step"):
                index = number(step, "s", where)
                wbid = step.get("wbid")
                wbid_send = step.get("wbid_send")
                steps.append(XmlStep(rank, tb_id, index, step.get("type", ""), step.get("srcbuf", "i"),
                                     number(step, "srcoff", f"{where} step {index}"), step.get("dstbuf", "o"),
                                     number(step, "dstoff", f"{where} step {index}"),
                                     number(step, "cnt", f"{where} step {index}"),
                                     number(step, "depid", f"{where} step {index}"),
                                     number(step, "deps", f"{where} step {index}"),
                                     int(wbid) if wbid is not None else None,
                                     int(wbid_send) if wbid_send is not None else None))
            for position, step in enumerate(steps):
                if step.index != position:
                    raise MscclError(f"{source}: rank {rank} tb {tb_id}: step {position} is numbered {step.index} "
                                     "(a step is missing or out of order)")
            algo.tbs[rank][tb_id] = XmlTb(rank, tb_id, number(tb, "send", where), number(tb, "recv", where),
                                          number(tb, "chan", where), steps)
    if sorted(algo.buffers) != list(range(ngpus)):
        raise MscclError(f"{source}: expected <gpu> ids 0..{ngpus - 1}, got {sorted(algo.buffers)}")
    return algo


