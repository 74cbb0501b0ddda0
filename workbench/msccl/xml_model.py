"""The threadblocks and steps of an MSCCL XML file, as ``workbench.msccl.parse`` reads them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["XmlStep", "XmlTb", "XmlAlgo"]


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
    nchannels: int | None = None  # when the file declares it: every tb's chan is below it

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
