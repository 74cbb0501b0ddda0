"""The typed parts of a cell: its topology, collective, formulation and design entries.

``config.checks`` validates a config's entries as plain mappings; ``config.experiment`` turns each
checked entry into one of these frozen dataclasses (``from_dict``), and everything downstream (the
cells, the runner, the cell process, the report) reads their fields. ``to_dict`` gives back the
mapping as the config wrote it after checking: the cell ids hash parts of it, so its keys, their
order and their values are exactly those of the checked entry. All are plain data: they pickle
to a cell process or a Dask worker as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["TopologySpec", "CollectiveSpec", "FormulationSpec", "DesignSpec", "BuiltSize"]

# (NPUs, nodes, links) of a topology built at load time (``config.checks.check_builds``)
BuiltSize = tuple[int, int, int]


@dataclass(frozen=True)
class TopologySpec:
    """A grid topology: a builder spec, a file, a document (``workbench synth``) or a design's
    result (``design``, the config's ``from``, with its ``builder`` and ``expand``)."""

    label: str
    spec: str | None = None
    file: str | None = None
    design: str | None = None  # the config's ``from``: a design cell whose bandwidths it takes
    builder: str | None = None
    expand: str | None = None
    alpha: list[float] | None = None
    bandwidth: list[float] | None = None
    overhead: list[float] | None = None
    has_overhead: bool = False  # ``overhead`` was given (older configs' cells have no such key)
    doc: dict[str, Any] | None = None
    # built once at load time to check it; not part of the entry as written
    size: BuiltSize | None = field(default=None, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], size: BuiltSize | None = None) -> "TopologySpec":
        """The spec of a checked ``grid.topologies`` entry (or a ``{label, ...}`` mapping)."""
        return cls(label=str(data.get("label", "topology")), spec=data.get("spec"), file=data.get("file"),
                   design=data.get("from"), builder=data.get("builder"), expand=data.get("expand"),
                   alpha=data.get("alpha"), bandwidth=data.get("bandwidth"), overhead=data.get("overhead"),
                   has_overhead="overhead" in data, doc=data.get("doc"), size=size)

    @property
    def source(self) -> str | None:
        """What the rows call the topology's source: its spec, file or design."""
        return self.spec or self.file or self.design

    def to_dict(self) -> dict[str, Any]:
        """The checked entry as a mapping, keys in the order ``config.checks.parse_topology`` sets them."""
        data: dict[str, Any] = {}
        for key, value in (("spec", self.spec), ("file", self.file), ("from", self.design)):
            if value is not None:
                data[key] = value
        if self.design is not None:
            data.update(builder=self.builder, expand=self.expand)
        if self.doc is not None:
            data["doc"] = self.doc
        data.update(alpha=self.alpha, bandwidth=self.bandwidth)
        if self.has_overhead:
            data["overhead"] = self.overhead
        data["label"] = self.label
        return data


@dataclass(frozen=True)
class CollectiveSpec:
    """A collective by kind (and root), or a custom one given by its demand (``kind == "custom"``)."""

    kind: str
    root: int | None = None
    ranks: int | None = None
    pre: Any = None
    post: Any = None
    combining: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | "CollectiveSpec") -> "CollectiveSpec":
        """The spec of a checked collective entry (a spec is returned as it is)."""
        if isinstance(data, CollectiveSpec):
            return data
        return cls(kind=data["kind"], root=data.get("root"), ranks=data.get("ranks"), pre=data.get("pre"),
                   post=data.get("post"), combining=bool(data.get("combining", False)))

    def to_dict(self) -> dict[str, Any]:
        """The entry as the cell id hashes it: ``{kind, root}``, plus the demand of a custom one."""
        data: dict[str, Any] = {"kind": self.kind, "root": self.root}
        if self.kind == "custom":
            data.update(ranks=self.ranks, pre=self.pre, post=self.post, combining=self.combining)
        return data


# the keys a formulation entry may narrow the grid with, in the order ``parse_formulation`` sets them
_OWN_KEYS = ("collectives", "chunks", "seeds", "sizes", "topologies")


@dataclass(frozen=True)
class FormulationSpec:
    """A ``grid.formulations`` entry: the formulation's name, its column label, its parameters, and
    the grid points it narrows to (None: the grid's)."""

    name: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)
    collectives: tuple[CollectiveSpec, ...] | None = None
    chunks: tuple[int, ...] | None = None
    seeds: tuple[int, ...] | None = None
    sizes: tuple[float, ...] | None = None
    topologies: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | "FormulationSpec") -> "FormulationSpec":
        """The spec of a checked formulation entry (a spec is returned as it is)."""
        if isinstance(data, FormulationSpec):
            return data
        collectives = data.get("collectives")
        return cls(name=data["name"], label=str(data.get("label") or data["name"]),
                   params=dict(data.get("params") or {}),
                   collectives=None if collectives is None else tuple(CollectiveSpec.from_dict(c) for c in collectives),
                   **{k: None if data.get(k) is None else tuple(data[k]) for k in _OWN_KEYS[1:]})

    def to_dict(self) -> dict[str, Any]:
        """The checked entry as a mapping (``{name, label, params}`` and the keys it narrows)."""
        data: dict[str, Any] = {"name": self.name, "label": self.label, "params": self.params}
        for key in _OWN_KEYS:
            value = getattr(self, key)
            if value is not None:
                data[key] = [v.to_dict() for v in value] if key == "collectives" else list(value)
        return data


@dataclass(frozen=True)
class DesignSpec:
    """A ``grid.designs`` entry. ``run_problem`` is its problem with data paths resolved against
    the config's folder (what the cell reads), ``key_problem`` the problem as its id names it
    (``config.checks.data_paths``); both are None when no folder was given."""

    name: str
    formulation: str
    problem: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None
    run_problem: dict[str, Any] | None = None
    key_problem: dict[str, Any] | None = None
