"""Who sends whom which shares in a Reduce-Scatter or All-Gather among q members of one level.

Member ``m`` owns share ``m`` (the chunks it ends the Reduce-Scatter with, or starts the
All-Gather with). Two patterns, each a list of levels (a level waits for the one before it), each
level a list of rounds (independent of each other, listed one after another), each round a list of
sends ``(src, dst, shares)`` that is a permutation of the members:

* ``direct``: one level of q - 1 rounds; in round o member m sends member m + o its share of it
  (Reduce-Scatter) or its own share (All-Gather). One alpha, q - 1 messages a member.
* ``halving-doubling`` (q a power of two; R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of
  Collective Communication Operations in MPICH", IJHPCA 19(1), 2005): log2 q levels of one round;
  recursive halving for the Reduce-Scatter (partner distance q/2, q/4, ..., 1, each time the half
  of the shares on the partner's side) and recursive doubling for the All-Gather (distance 1, 2,
  ..., q/2, everything held). log2 q alphas and messages a member, the same q - 1 shares.

On a non-blocking switch both move the same bytes; the second pays fewer per-message overheads and
more alphas (``cost``).
"""

from __future__ import annotations

__all__ = ["EXCHANGES", "Send", "pattern", "allowed", "shape"]

EXCHANGES = ("direct", "halving-doubling")
Send = tuple[int, int, tuple[int, ...]]  # (src member, dst member, shares sent)


def allowed(q: int) -> tuple[str, ...]:
    """The patterns defined for q members (halving-doubling: a power of two, at least 4; with 2
    members it is the direct exchange)."""
    return EXCHANGES if q >= 4 and q & (q - 1) == 0 else EXCHANGES[:1]


def shape(q: int, how: str) -> tuple[int, int, int]:
    """(messages a member sends, shares it sends, levels one after another)."""
    if how == "direct":
        return q - 1, q - 1, 1
    levels = q.bit_length() - 1
    return levels, q - 1, levels


def pattern(q: int, reduce: bool, how: str) -> list[list[list[Send]]]:
    """The levels of rounds of sends (module docstring)."""
    if how == "direct":
        return [[[(m, (m + o) % q, ((m + o) % q,) if reduce else (m,)) for m in range(q)] for o in range(1, q)]]
    if how not in EXCHANGES or q not in (1 << b for b in range(q.bit_length())):
        raise ValueError(f"halving-doubling needs a power of two members, got {q}")
    distances = [1 << b for b in range(q.bit_length() - 1)]
    if reduce:
        return [[[(m, m ^ d, _halves(m, d, q)) for m in range(q)]] for d in reversed(distances)]
    return [[[(m, m ^ d, tuple(x for x in range(q) if x & ~(d - 1) == m & ~(d - 1))) for m in range(q)]]
            for d in distances]


def _halves(m: int, d: int, q: int) -> tuple[int, ...]:
    """What member m sends at distance d of recursive halving: the shares it still holds (those
    agreeing with it above d) that lie on its partner's side of d."""
    above = ~(2 * d - 1)
    return tuple(x for x in range(q) if x & above == m & above and x & d != m & d)
