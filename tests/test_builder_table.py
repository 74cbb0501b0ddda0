"""The builder table (``workbench.topology.builder_table``) as the one reader of topology specs: each
entry's size estimate against the topology it builds, parse errors as single lines, and the help
listing naming exactly the table's kinds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from workbench.topology import builder_table
from workbench.util import size_guard
from workbench.cli import main
from workbench.topology import BUILDERS, TopologyError, build, load_topology
from workbench.topology.builder_table import TABLE, estimate, help_lines, known_names, parse_spec

EXAMPLES = [(builder.usage, spec) for builder in TABLE for spec in builder.examples]

# At least one malformed argument per kind: each must be refused in one line naming the spec.
BAD = {
    "ring": ["ring:0", "ring:x", "ring:", "ring:4x", "ring:-3", "ring:1e3"],
    "uniring": ["uniring:0"], "line": ["line:two"], "fc": ["fc:"],
    "mesh": ["mesh:2x3x4x5", "mesh:0x3", "mesh:2xx3"], "torus": ["torus:a"],
    "switch": ["switch:4@0", "switch:4@2@3", "switch:@2", "switch:"],
    "md": ["md:", "md:R4,Q2", "md:R4@2", "md:F4@2", "md:S4@0", "md:S4@x", "md:R4,,S2"],
    "rfs": ["rfs:2x3", "rfs:2x3xa", "rfs:0x2x2"],
    "dragonfly": ["dragonfly:3", "dragonfly:3x4x5", "dragonfly:0x3"],
    "dgx1": ["dgx1:3"], "dgx1-msccl": ["dgx1-msccl:2"], "amd-z52": ["amd-z52:1"],
    "ndv2": ["ndv2:0", "ndv2:x", "ndv2:1x2"], "ndv2-taccl": ["ndv2-taccl:-1"], "dgx2": ["dgx2:-1"],
    "dgx2-taccl": ["dgx2-taccl:two"], "ndv2-nic": ["ndv2-nic:0"], "ndv2-taccl-nic": ["ndv2-taccl-nic:x"],
    "dgx2-nic": ["dgx2-nic:0"], "dgx2-taccl-nic": ["dgx2-taccl-nic:1,2"], "amd": ["amd:0"],
    "nvs-ib": ["nvs-ib:0", "nvs-ib:1,2"],
    "rails": ["rails:4", "rails:4x8x2", "rails:4x8,colour=3", "rails:4x8,leaf", "rails:4x8,leaf=0",
              "rails:4x8,leaf=2,leaf=3", "rails:4x8,over=0.5", "rails:0x8", "rails:"],
    "fattree": ["fattree:3", "fattree:4x4", "fattree:4,leaf=2", "fattree:0"],
    "leafspine": ["leafspine:4x4", "leafspine:4x4x0", "leafspine:4x4x2,spines=3"],
    "hgx": ["hgx:0", "hgx:2,nvls=maybe", "hgx:2,sharp=1", "hgx:2,rate=fast", "hgx:2,nvls=off,rate=1GB/s",
            "hgx:2,sharp,sharp", "hgx:x"],
    "nvl72": ["nvl72:2", "nvl72:nvls=maybe"],
}


@pytest.mark.parametrize("usage, spec", EXAMPLES)
def test_the_estimate_is_the_built_size_or_bounds_it(usage, spec):
    """Exact entries (the clusters) estimate the built topology; the others bound it from above;
    the size guard reads the same estimate."""
    builder = next(b for b in TABLE if b.usage == usage)
    parsed = parse_spec(spec)
    assert parsed.builder is builder
    topology = build(spec)
    built = (topology.num_npus, topology.num_nodes, len(topology.links))
    size = estimate(spec)
    guard = builder_table.spec_size(spec)
    if builder.size is None:  # a fixed-size system is not estimated
        assert size is None and guard is None
        return
    assert (guard.npus, guard.nodes, guard.links) == tuple(size)
    if builder.exact:
        assert tuple(size) == built, spec
    else:
        assert all(e >= b for e, b in zip(size, built)), (spec, size, built)


def test_every_entry_has_examples_and_every_kind_has_a_malformed_one():
    assert all(builder.examples for builder in TABLE)
    assert set(BAD) == set(known_names())


@pytest.mark.parametrize("spec", [spec for specs in BAD.values() for spec in specs])
def test_a_malformed_spec_is_one_line_naming_it(spec):
    with pytest.raises(TopologyError) as parsed:
        parse_spec(spec)
    message = str(parsed.value)
    assert "\n" not in message and repr(spec) in message, message
    assert estimate(spec) is None and builder_table.spec_size(spec) is None
    with pytest.raises(TopologyError) as loaded:
        load_topology(spec)
    assert str(loaded.value) == message


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(known_names()), st.text(alphabet="0123456789xX@,=RFSrfs.-: lefapinsov", max_size=14))
def test_any_argument_parses_or_is_refused_in_one_line(kind, arg):
    """Whatever follows a known kind, the table answers with typed arguments and an estimate, or
    one ``TopologyError`` line; never another exception."""
    spec = f"{kind}:{arg}"
    try:
        parsed = parse_spec(spec)
    except TopologyError as exc:
        assert "\n" not in str(exc)
        assert estimate(spec) is None
        return
    size = parsed.size()
    assert size is None or min(size) >= 0


def test_unknown_kinds_name_every_builder():
    with pytest.raises(TopologyError) as info:
        parse_spec("blob:3")
    message = str(info.value)
    assert message.startswith("unknown topology spec 'blob:3' (known: ") and "\n" not in message
    assert all(usage in message for usage in BUILDERS)


def _names_in(usage: str) -> list[str]:
    """The kinds a help line's usage names: ``ndv2-nic:K, ndv2-taccl-nic:K`` -> ndv2-nic, ndv2-taccl-nic."""
    return [part.split(":")[0].strip() for part in usage.split(", ")]


def test_the_help_names_exactly_the_table_kinds():
    help_names = [name for usage in BUILDERS for name in _names_in(usage)]
    assert sorted(help_names) == sorted(known_names())
    assert len(known_names()) == sum(len(builder.names) for builder in TABLE)  # no kind in two entries
    for builder in TABLE:
        assert _names_in(builder.usage) == list(builder.names)
    assert BUILDERS == help_lines()


def test_workbench_builders_prints_one_line_per_entry(capsys):
    assert main(["builders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(TABLE)
    for line, builder in zip(lines, TABLE):
        assert line.startswith(builder.usage + " ") and line.endswith(builder.help)
