"""The threadblocks and steps of an MSCCL XML file, as ``workbench.msccl.parse`` reads them."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.msccl.layout import in_place_slot

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
    checked_in_place: bool | None = None  # the aliasing being checked (``aliasings``); None: the declared one

    def aliasings(self) -> list[bool]:
        """The aliasings the file declares itself valid for, out of place (False) first: in place with
        ``inplace="1"``, out of place with ``outofplace="1"`` or when it does not say in place (the
        research runtime's in-place files omit ``outofplace``); a file with both is checked in both."""
        in_place = self.attrs.get("inplace") == "1"
        out_of_place = self.attrs.get("outofplace") == "1" or not in_place
        return [aliased for aliased, declared in ((False, out_of_place), (True, in_place)) if declared]

    @property
    def in_place(self) -> bool:
        """Whether input and output are one buffer in the run being checked: ``checked_in_place`` when
        set, else in place only for a file valid for in-place calls alone."""
        if self.checked_in_place is not None:
            return self.checked_in_place
        return self.aliasings() == [True]

    def slot(self, rank: int, buf: str, off: int) -> tuple[str, int]:
        """The buffer slot a (buf, off) names: itself out of place; in place, where NCCL's one buffer
        puts it (``layout.in_place_slot``)."""
        if not self.in_place:
            return buf, off
        return in_place_slot(self.coll, max(self.nchunksperloop // max(self.ngpus, 1), 1), rank, buf, off)

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
