"""A writer of MSCCL <step> elements for the hand-written test files."""

from __future__ import annotations


def step_xml(s: int, kind: str, src: str = "i", srcoff: int = -1, dst: str = "o", dstoff: int = -1, cnt: int = 1,
             depid: int = -1, deps: int = -1, hasdep: int = 0) -> str:
    return (f'<step s="{s}" type="{kind}" srcbuf="{src}" srcoff="{srcoff}" dstbuf="{dst}" dstoff="{dstoff}" '
            f'cnt="{cnt}" depid="{depid}" deps="{deps}" hasdep="{hasdep}"/>')
