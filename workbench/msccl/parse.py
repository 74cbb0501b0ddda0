"""Reading an MSCCL XML file into threadblocks and steps."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from workbench.msccl.common import MscclError, MscclFormatError
from workbench.msccl.validate import check_indices, guard_sizes
from workbench.msccl.xml_model import XmlAlgo, XmlStep, XmlTb

__all__ = ["XmlStep", "XmlTb", "XmlAlgo", "parse_xml"]


def parse_xml(text: str, source: str = "xml") -> XmlAlgo:
    """The file's threadblocks and steps, after the size guard has read what it declares and every
    index it names has been checked (``workbench.msccl.validate``)."""
    from workbench.util import size_guard

    size_guard.check(source, size_guard.BYTES_PER_TEXT * len(text))  # the parse and the run grow with the text
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MscclFormatError(f"{source}: not well-formed XML ({exc})") from None
    if root.tag != "algo":  # not an MSCCL file at all: bad input, as the two errors below
        raise MscclFormatError(f"{source}: the root element must be <algo>, got <{root.tag[:40]}>")

    def number(element, key: str, where: str) -> int:
        value = element.get(key)
        try:
            return int(value)
        except (TypeError, ValueError):
            shown = value if value is None or len(value) <= 40 else value[:37] + "..."
            raise MscclFormatError(f"{source}: {where}: attribute {key}={shown!r} must be an integer") from None

    ngpus = number(root, "ngpus", "<algo>")
    algo = XmlAlgo(dict(root.attrib), ngpus, root.get("coll", ""), number(root, "nchunksperloop", "<algo>"), {}, {})
    if root.get("nchannels") is not None:
        algo.nchannels = number(root, "nchannels", "<algo>")
    for gpu in root.findall("gpu"):
        rank = number(gpu, "id", "<gpu>")
        if rank in algo.buffers:  # a second <gpu> of one id would silently replace the first
            raise MscclError(f"{source}: <gpu> id {rank} appears twice")
        algo.buffers[rank] = {b: number(gpu, f"{b}_chunks", f"gpu {rank}") for b in ("i", "o", "s")}
        algo.tbs[rank] = {}
        for tb in gpu.findall("tb"):
            tb_id = number(tb, "id", f"gpu {rank} <tb>")
            where = f"rank {rank} tb {tb_id}"
            if tb_id in algo.tbs[rank]:
                raise MscclError(f"{source}: {where}: the threadblock id appears twice on gpu {rank}")
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
                                     number(step, "wbid", f"{where} step {index}") if wbid is not None else None,
                                     number(step, "wbid_send", f"{where} step {index}")
                                     if wbid_send is not None else None))
            for position, step in enumerate(steps):
                if step.index != position:
                    raise MscclError(f"{source}: rank {rank} tb {tb_id}: step {position} is numbered {step.index} "
                                     "(a step is missing or out of order)")
            algo.tbs[rank][tb_id] = XmlTb(rank, tb_id, number(tb, "send", where), number(tb, "recv", where),
                                          number(tb, "chan", where), steps)
    guard_sizes(algo, source)  # before anything is built from the declared numbers
    if len(algo.buffers) != ngpus or sorted(algo.buffers) != list(range(ngpus)):
        raise MscclError(f"{source}: expected <gpu> ids 0..{ngpus - 1}, got {sorted(algo.buffers)[:20]}"
                         + (" ..." if len(algo.buffers) > 20 else ""))
    check_indices(algo, source)
    return algo


