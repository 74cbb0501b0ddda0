"""TACCL communication sketches: the normalised form of note section 2.6, loaded and validated.

A sketch accepts the paper's spelling (Listing 1: ``intranode_sketch``, ``internode_sketch``,
``internode_conn``, ``chunk_to_relay_map``, ``beta_split``, ``symmetry_offsets``,
``hyperparameters.input_chunkup``) and the normalised one (``intranode``, ``internode.conn``,
``internode.relay_of``, ``symmetry``). Every error names the file and the field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.util.safe_load import load_file

__all__ = ["Sketch", "SketchError", "load_sketch", "sketch_from_dict", "SKETCH_DIR", "available_sketches"]

SKETCH_DIR = Path(__file__).parent / "sketches"
POLICIES = ("uc-min", "uc-max", "none")
INTRANODE = ("none", "switch")


class SketchError(ValueError):
    """A malformed sketch; the message names the file and the field."""


@dataclass
class Sketch:
    name: str = "default"
    nnodes: int | None = None  # None: the topology's chassis count (1 if it has none)
    intranode_strategy: str = "none"
    switches: list[list[int]] = field(default_factory=list)  # local ids; restricts the policy term
    hyperedge_policy: str = "none"
    conn: Any = None  # None (every physical inter-node path) | "fully-connected" | "direct-map" | {s: [d]}
    relay_rev_map: dict[int, list[int]] | None = None  # sender -> local GPUs whose chunks it relays
    relay_affine: tuple[int, int] | None = None  # paper form [r1, r2]
    beta_split: dict[int, float] = field(default_factory=dict)  # sender -> n (uses 1/n of IB bandwidth)
    enforce_ordering: bool = False
    symmetry: list[tuple[int, int | str]] = field(default_factory=list)  # (offset, group size | "n")
    chunkup: int | None = None  # None: the problem's chunks per rank
    input_size: str | None = None  # informational: the problem's size is used
    shortest_paths: bool = True  # restrict each chunk to ranks on hop-shortest paths (note C1)
    source: str = "sketch"

    # ------------------------------------------------------------------ derived helpers
    def relay_sender(self, local_rank: int) -> list[int] | None:
        """The local senders allowed to carry a chunk of ``local_rank`` off its node (None: any)."""
        if self.relay_rev_map is not None:
            senders = [s for s, ranks in self.relay_rev_map.items() if local_rank in ranks]
            return senders
        if self.relay_affine is not None:
            r1, r2 = self.relay_affine
            return [(local_rank // r1) * r1 + r2]
        return None

    def allows_internode(self, local_src: int, local_dst: int, gpus_per_node: int) -> bool:
        """True when the inter-node ``conn`` lets local GPU ``local_src`` send to ``local_dst`` on another
        node (None or fully-connected: any; direct-map: the same local id; else the map's list)."""
        if self.conn is None or self.conn == "fully-connected":
            return True
        if self.conn == "direct-map":
            return local_src == local_dst
        return local_dst in self.conn.get(local_src, ())

    def to_dict(self) -> dict[str, Any]:
        """The sketch in its normalised spelling (module docstring)."""
        return {
            "name": self.name, "nnodes": self.nnodes,
            "intranode": {"strategy": self.intranode_strategy, "switches": self.switches,
                          "hyperedge_policy": self.hyperedge_policy},
            "internode": {"conn": self.conn if not isinstance(self.conn, dict) else {str(k): v for k, v in self.conn.items()},
                          "relay_of": ({"rev_map": {str(k): v for k, v in self.relay_rev_map.items()}}
                                       if self.relay_rev_map is not None else
                                       {"affine": list(self.relay_affine)} if self.relay_affine else None),
                          "beta_split": {str(k): v for k, v in self.beta_split.items()},
                          "enforce_ordering": self.enforce_ordering},
            "symmetry": [list(s) for s in self.symmetry],
            "hyperparameters": {"input_chunkup": self.chunkup, "input_size": self.input_size},
            "shortest_paths": self.shortest_paths,
        }


def available_sketches() -> list[str]:
    """The names of the shipped sketches (``SKETCH_DIR``'s YAML files), sorted."""
    return sorted(p.stem for p in SKETCH_DIR.glob("*.yaml"))


def load_sketch(spec: Any) -> Sketch:
    """A sketch from a dict, a shipped name (``dgx2-sk-1``), or a YAML/JSON file path; None = default."""
    if spec is None or spec == "default":
        return Sketch()
    if isinstance(spec, Sketch):
        return spec
    if isinstance(spec, dict):
        return sketch_from_dict(spec, "sketch")
    text = str(spec)
    path = Path(text)
    # os.path.exists: a name too long or with a NUL byte is "not there", not an OSError
    if not os.path.exists(path) and os.path.exists(SKETCH_DIR / f"{text}.yaml"):
        path = SKETCH_DIR / f"{text}.yaml"
    if not os.path.exists(path):
        raise SketchError(f"sketch {text!r}: no such file or shipped sketch (shipped: {', '.join(available_sketches())})")
    # a folder or FIFO, a binary file, duplicate keys, an alias bomb: one line naming the sketch
    data = load_file(path, "sketch", lambda message: SketchError(f"sketch {message}"))
    return sketch_from_dict(data, str(path))


# ---------------------------------------------------------------------------------- parsing
def _fail(source: str, where: str, message: str) -> SketchError:
    return SketchError(f"sketch {source}: field {where}: {message}")


def _int(value: Any, source: str, where: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _fail(source, where, f"expected an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise _fail(source, where, f"expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise _fail(source, where, f"must be >= {minimum}, got {number}")
    return number


def _int_list(value: Any, source: str, where: str) -> list[int]:
    if not isinstance(value, list):
        raise _fail(source, where, f"expected a list of integers, got {value!r}")
    return [_int(v, source, f"{where}[{i}]", 0) for i, v in enumerate(value)]


_KNOWN_TOP = {"name", "nnodes", "intranode", "intranode_sketch", "internode", "internode_sketch", "symmetry",
              "symmetry_offsets", "hyperparameters", "shortest_paths", "description", "sketch"}


def sketch_from_dict(data: Any, source: str = "sketch") -> Sketch:
    """A ``Sketch`` from a sketch document in either spelling (a top-level ``sketch`` key unwrapped);
    ``SketchError`` names ``source`` and the field."""
    if not isinstance(data, dict):
        raise SketchError(f"sketch {source}: expected a mapping at the top level, got {type(data).__name__}")
    if "sketch" in data and isinstance(data["sketch"], dict):
        data = data["sketch"]
    unknown = sorted(set(data) - _KNOWN_TOP)
    if unknown:
        raise _fail(source, unknown[0], f"unknown field (known: {', '.join(sorted(_KNOWN_TOP - {'sketch'}))})")
    sketch = Sketch(source=source)
    sketch.name = str(data.get("name", Path(source).stem if source != "sketch" else "custom"))
    if data.get("nnodes") is not None:
        sketch.nnodes = _int(data["nnodes"], source, "nnodes", 1)
    _parse_intranode(sketch, data.get("intranode", data.get("intranode_sketch")), source)
    _parse_internode(sketch, data.get("internode", data.get("internode_sketch")), source)
    _parse_symmetry(sketch, data.get("symmetry", data.get("symmetry_offsets")), source)
    hyper = data.get("hyperparameters") or {}
    if not isinstance(hyper, dict):
        raise _fail(source, "hyperparameters", "expected a mapping")
    for key in hyper:
        if key not in ("input_chunkup", "input_size", "size_semantics"):
            raise _fail(source, f"hyperparameters.{key}", "unknown field (known: input_chunkup, input_size)")
    if hyper.get("input_chunkup") is not None:
        sketch.chunkup = _int(hyper["input_chunkup"], source, "hyperparameters.input_chunkup", 1)
    if hyper.get("input_size") is not None:
        sketch.input_size = str(hyper["input_size"])
    if "shortest_paths" in data:
        if not isinstance(data["shortest_paths"], bool):
            raise _fail(source, "shortest_paths", f"expected true or false, got {data['shortest_paths']!r}")
        sketch.shortest_paths = data["shortest_paths"]
    return sketch


def _parse_intranode(sketch: Sketch, intra: Any, source: str) -> None:
    if intra is None:
        return
    if not isinstance(intra, dict):
        raise _fail(source, "intranode", "expected a mapping")
    strategy = intra.get("strategy", "none")
    if strategy not in INTRANODE:
        raise _fail(source, "intranode.strategy", f"must be one of {', '.join(INTRANODE)}, got {strategy!r}")
    sketch.intranode_strategy = strategy
    switches = intra.get("switches") or []
    if not isinstance(switches, list):
        raise _fail(source, "intranode.switches", "expected a list of lists of local GPU ids")
    sketch.switches = [_int_list(s, source, f"intranode.switches[{i}]") for i, s in enumerate(switches)]
    for i, a in enumerate(sketch.switches):
        for j, b in enumerate(sketch.switches[:i]):
            if set(a) != set(b) and set(a) & set(b):
                raise _fail(source, f"intranode.switches[{i}]", f"overlaps switches[{j}] without being identical")
    policy = intra.get("hyperedge_policy", intra.get("switch_hyperedge_strategy", "none"))
    if isinstance(policy, list):
        policy = policy[0] if policy else "none"
    if policy not in POLICIES:
        raise _fail(source, "intranode.hyperedge_policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
    if strategy == "switch" and not sketch.switches and "switches" in intra:
        raise _fail(source, "intranode.switches", "strategy switch needs at least one switch")
    sketch.hyperedge_policy = policy


def _parse_internode(sketch: Sketch, inter: Any, source: str) -> None:
    if inter is None:
        return
    if not isinstance(inter, dict):
        raise _fail(source, "internode", "expected a mapping")
    strategy = inter.get("strategy", "relay")
    if strategy != "relay":
        raise _fail(source, "internode.strategy", f"only 'relay' is supported, got {strategy!r}")
    _parse_conn(sketch, inter.get("conn", inter.get("internode_conn")), source)
    _parse_relay(sketch, inter, source)
    _parse_beta_split(sketch, inter.get("beta_split") or {}, source)
    ordering = inter.get("enforce_ordering", False)
    if not isinstance(ordering, bool):
        raise _fail(source, "internode.enforce_ordering", f"expected true or false, got {ordering!r}")
    if ordering and sketch.relay_rev_map is None and sketch.relay_affine is None:
        raise _fail(source, "internode.enforce_ordering", "needs a relay map (relay_of)")
    sketch.enforce_ordering = ordering


def _parse_conn(sketch: Sketch, conn: Any, source: str) -> None:
    """``internode.conn``: "fully-connected", "direct-map" or sender -> destinations (as many for each)."""
    if conn is None or conn in ("fully-connected", "direct-map"):
        sketch.conn = conn
    elif isinstance(conn, dict):
        parsed: dict[int, list[int]] = {}
        for key, dsts in conn.items():
            s = _int(key, source, f"internode.conn key {key!r}", 0)
            parsed[s] = _int_list(dsts if isinstance(dsts, list) else [dsts], source, f"internode.conn[{key}]")
        counts = {len(v) for v in parsed.values()}
        if len(counts) > 1:
            raise _fail(source, "internode.conn", f"every sender must list the same number of destinations, got {sorted(counts)}")
        sketch.conn = parsed
    else:
        raise _fail(source, "internode.conn", f"expected a mapping, 'fully-connected' or 'direct-map', got {conn!r}")


def _parse_relay(sketch: Sketch, inter: dict, source: str) -> None:
    """``internode.relay_of`` (rev_map and/or affine; the released tool's field names too), checked against conn."""
    relay = inter.get("relay_of")
    rev_map = inter.get("gpus_to_sender_rev_map")
    affine = inter.get("chunk_to_relay_map")
    if isinstance(relay, dict):
        rev_map = relay.get("rev_map", rev_map)
        affine = relay.get("affine", affine)
        unknown = set(relay) - {"rev_map", "affine"}
        if unknown:
            raise _fail(source, f"internode.relay_of.{sorted(unknown)[0]}", "unknown field (known: rev_map, affine)")
    elif relay is not None:
        raise _fail(source, "internode.relay_of", "expected a mapping with rev_map or affine")
    if rev_map is not None:
        if not isinstance(rev_map, dict):
            raise _fail(source, "internode.relay_of.rev_map", "expected a mapping sender -> [local GPUs]")
        sketch.relay_rev_map = {_int(k, source, f"internode.relay_of.rev_map key {k!r}", 0):
                                _int_list(v, source, f"internode.relay_of.rev_map[{k}]") for k, v in rev_map.items()}
    if affine is not None:
        pair = _int_list(affine, source, "internode.relay_of.affine")
        if len(pair) != 2 or pair[0] < 1:
            raise _fail(source, "internode.relay_of.affine", f"expected [r1 >= 1, r2], got {affine!r}")
        sketch.relay_affine = (pair[0], pair[1])
    senders = _relay_senders(sketch)
    if senders and isinstance(sketch.conn, dict):
        missing = sorted(set(senders) - set(sketch.conn))
        if missing:
            raise _fail(source, "internode.relay_of", f"relay sender {missing[0]} is not an inter-node sender in conn")


def _parse_beta_split(sketch: Sketch, split: Any, source: str) -> None:
    """``internode.beta_split``: sender -> n >= 1 ("auto" or nothing: none)."""
    if split == "auto":
        split = {}
    if not isinstance(split, dict):
        raise _fail(source, "internode.beta_split", "expected a mapping sender -> n")
    for key, value in split.items():
        s = _int(key, source, f"internode.beta_split key {key!r}", 0)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 1 <= value <= 1e300:  # NaN, inf too
            raise _fail(source, f"internode.beta_split[{key}]", f"expected a number >= 1, got {value!r}")
        sketch.beta_split[s] = float(value)


def _relay_senders(sketch: Sketch) -> list[int]:
    if sketch.relay_rev_map is not None:
        return list(sketch.relay_rev_map)
    return []


def _parse_symmetry(sketch: Sketch, entries: Any, source: str) -> None:
    if entries is None:
        return
    if not isinstance(entries, list):
        raise _fail(source, "symmetry", "expected a list of [offset, group_size] pairs")
    for i, entry in enumerate(entries):
        if not isinstance(entry, list) or len(entry) != 2:
            raise _fail(source, f"symmetry[{i}]", f"expected [offset, group_size], got {entry!r}")
        offset = _int(entry[0], source, f"symmetry[{i}][0]", 1)
        group = entry[1] if entry[1] in ("n", "all") else _int(entry[1], source, f"symmetry[{i}][1]", 2)
        if isinstance(group, int) and offset >= group:
            raise _fail(source, f"symmetry[{i}]", f"offset {offset} must be below the group size {group}")
        sketch.symmetry.append((offset, "n" if group == "all" else group))
