"""Hostile and broken input files: every reader of a user file (topologies, configs, demands,
sketches, plans, MSCCL XML, run folders) answers with one line naming the file and the field, exit
2, quickly and in little memory: alias bombs, duplicate keys, FIFOs, deep nesting, overlong
integers, and fields read by type rather than by truth (``bidirectional: "no"``)."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guards import deadline
from workbench.cli import main
from workbench.config.experiment import ConfigError, load_experiment
from workbench.util.safe_load import InputError, MAX_DEPTH, parse_json, parse_yaml, read_input
from workbench.topology import TopologyError
from workbench.topology.builders import load_topology

TOPOLOGY = """name: pair
nodes: [{id: 0}, {id: 1}]
links:
  - {src: 0, dst: 1, bandwidth: 50GB/s, alpha: 1us, bidirectional: BIDIR}
"""
CONFIG = """name: tiny
grid:
  topologies: [ring:4]
  collectives: [allgather]
  sizes: [1MB]
  formulations: [ring]
"""
# nine levels of nine aliases each: 600 bytes that expand to 9^9 (387 million) scalars
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


def _one_line(capsys) -> str:
    """The single stderr line of a refused command (no traceback)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------------------ alias bombs
@pytest.mark.parametrize("command", ["topology", "run"])
def test_an_alias_bomb_is_one_line_fast_and_small(tmp_path, capsys, command):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 700
    with deadline(30.0):  # a hang guard (expanding 387 million scalars would not end); small: below
        assert main([command, str(bomb)]) == 2
    line = _one_line(capsys)
    assert str(bomb) in line and "aliases expand the document" in line
    parse_yaml("a: 1", "warm-up")  # PyYAML imported and the loader built before measuring
    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            parse_yaml(BOMB, "bomb.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6


def test_an_alias_that_contains_itself_is_refused():
    with pytest.raises(InputError, match=r"x\.yaml: a\[0\]: an alias that contains itself"):
        parse_yaml("a: &a [*a]\n", "x.yaml")


def test_aliases_within_the_limit_and_merge_keys_still_read():
    data = parse_yaml("base: &b {x: 1, y: 2}\none: {<<: *b, x: 3}\ntwo: [*b, *b]\n", "ok.yaml")
    assert data == {"base": {"x": 1, "y": 2}, "one": {"x": 3, "y": 2}, "two": [{"x": 1, "y": 2}] * 2}


# ------------------------------------------------------------------------------ duplicate keys
def test_a_duplicate_links_key_in_a_topology_names_it(tmp_path, capsys):
    path = tmp_path / "topo.yaml"
    path.write_text(TOPOLOGY.replace("BIDIR", "true") + "links: []\n")
    assert main(["topology", str(path)]) == 2
    assert _one_line(capsys) == f"error: {path}: links: duplicate key (line 5)"


def test_a_duplicate_grid_key_in_a_config_names_it(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text(CONFIG + "grid: {}\n")
    assert main(["run", str(path)]) == 2
    assert _one_line(capsys) == f"error: {path}: grid: duplicate key (line 7)"
    path.write_text(CONFIG + "  sizes: [1GB]\n")
    with pytest.raises(ConfigError, match=r"tiny\.yaml: grid\.sizes: duplicate key \(line 7\)"):
        load_experiment(path)


def test_duplicate_keys_in_a_demand_file(tmp_path, capsys):
    demand = tmp_path / "demand.yaml"
    demand.write_text("pre: [[0, [0]]]\npost: [[0, [1]]]\npost: [[0, [2]]]\n")
    assert main(["synth", "tacos", "--topology", "ring:4", "--demand", str(demand), "--size", "1MB",
                 "-o", str(tmp_path / "out.json")]) == 2
    assert _one_line(capsys) == f"error: {demand}: post: duplicate key (line 3)"


def test_duplicate_keys_in_a_sketch(tmp_path):
    from formulations.taccl.sketch import SketchError, load_sketch

    sketch = tmp_path / "sk.yaml"
    sketch.write_text("intranode:\n  strategy: switch\n  strategy: none\n")
    with pytest.raises(SketchError, match=r"sk\.yaml: intranode\.strategy: duplicate key \(line 3\)"):
        load_sketch(str(sketch))
    sketch = tmp_path / "sk.json"
    sketch.write_text('{"nnodes": 2, "symmetry": [], "nnodes": 1}')
    with pytest.raises(SketchError, match=r"sk\.json: nnodes: duplicate key"):
        load_sketch(str(sketch))


def test_duplicate_keys_in_a_plan(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text('{"collective": "allgather", "gpus": [{"id": 0, "id": 1}]}')
    assert main(["interpret", str(plan)]) == 2
    assert _one_line(capsys) == f"error: {plan}: gpus[0].id: duplicate key"


KEYS = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
TREES = st.recursive(st.integers(-3, 3) | KEYS,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                     max_leaves=12)


class _Twice:
    """A mapping written with ``key`` twice (what no dict can hold)."""

    def __init__(self, key: str, first, second, rest: dict) -> None:
        self.key, self.first, self.second, self.rest = key, first, second, rest


def _render(value) -> str:
    """JSON text (also YAML flow style) of a tree that may hold one ``_Twice``."""
    if isinstance(value, _Twice):
        pairs = [(value.key, value.first), *value.rest.items(), (value.key, value.second)]
        return "{" + ", ".join(f"{json.dumps(k)}: {_render(v)}" for k, v in pairs) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(_render, value)) + "]"
    return json.dumps(value)


@st.composite
def _duplicated(draw):
    """A document with one mapping, anywhere in it, that has a key twice; and that key's path."""
    tree = draw(TREES)
    steps = draw(st.lists(st.integers(0, 5), max_size=5))
    path, parent, slot, node = "", None, None, tree
    for step in steps:  # walk down the drawn tree as far as the steps and the tree allow
        if isinstance(node, dict) and node:
            key = sorted(node)[step % len(node)]
            parent, slot, node, path = node, key, node[key], f"{path}.{key}" if path else key
        elif isinstance(node, list) and node:
            index = step % len(node)
            parent, slot, node, path = node, index, node[index], f"{path}[{index}]"
        else:
            break
    key = draw(KEYS)
    rest = draw(st.dictionaries(KEYS, st.integers(), max_size=2))
    rest.pop(key, None)
    twice = _Twice(key, draw(TREES), draw(TREES), rest)
    if parent is None:
        tree = twice
    else:
        parent[slot] = twice
    return _render(tree), f"{path}.{key}" if path else key


@settings(max_examples=60, deadline=None)
@given(_duplicated(), st.sampled_from(["yaml", "json"]))
def test_a_duplicate_key_at_any_depth_is_refused_naming_its_path(document, syntax):
    text, key_path = document
    assume(len(key_path) <= 80)  # longer paths are cut in the message
    parse = parse_yaml if syntax == "yaml" else parse_json
    with pytest.raises(InputError) as refused:
        parse(text, f"doc.{syntax}")
    assert str(refused.value).startswith(f"doc.{syntax}: {key_path}: duplicate key"), (str(refused.value), text)


@settings(max_examples=40, deadline=None)
@given(TREES)
def test_documents_without_duplicates_read_as_the_standard_parsers_read_them(tree):
    text = _render(tree)
    assert parse_json(text, "t.json") == json.loads(text)
    assert parse_yaml(text, "t.yaml") == json.loads(text)


# ------------------------------------------------------------------------------ typed fields
@pytest.mark.parametrize("value", ['"no"', '"false"', "0", "1", "null", "[]", "yes_please"])
def test_bidirectional_must_be_a_boolean(tmp_path, value):
    path = tmp_path / "topo.yaml"
    path.write_text(TOPOLOGY.replace("BIDIR", value))
    with pytest.raises(TopologyError, match=r"topo\.yaml: links\[0\]\.bidirectional: expected true or false"):
        load_topology(path)


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.text(max_size=5), st.integers(), st.floats(allow_nan=False), st.none(),
                 st.lists(st.booleans(), max_size=2)))
def test_anything_but_a_boolean_is_refused_as_bidirectional(value):
    from workbench.topology.graph import topology_from_dict

    assume(not isinstance(value, bool))
    data = {"nodes": [{"id": 0}, {"id": 1}], "links": [{"src": 0, "dst": 1, "bandwidth": 1e9, "bidirectional": value}]}
    with pytest.raises(TopologyError, match=r"t: links\[0\]\.bidirectional: expected true or false"):
        topology_from_dict(data, "t")


def test_bidirectional_false_and_true(tmp_path):
    path = tmp_path / "topo.yaml"
    path.write_text(TOPOLOGY.replace("BIDIR", "false"))
    assert [(l.src, l.dst) for l in load_topology(path).links] == [(0, 1)]
    path.write_text(TOPOLOGY.replace("BIDIR", "true"))
    assert [(l.src, l.dst) for l in load_topology(path).links] == [(0, 1), (1, 0)]


@pytest.mark.parametrize("extra, field", [
    ("evaluation: {save_algorithms: 'no'}", "evaluation.save_algorithms"),
    ("evaluation: {lp_bound: 1}", "evaluation.lp_bound"),
    ("paper: {normalised: 'false', values: []}", "paper.normalised"),
    ("table: {geomean: 'no'}", "table.geomean"),
    ("paper: {values: [{row: a, column: b, value: true}]}", r"paper.values\[0\].value"),
    ("paper: {values: [{row: a, column: b, value: .nan}]}", r"paper.values\[0\].value"),
])
def test_config_flags_and_numbers_are_read_by_type(tmp_path, extra, field):
    path = tmp_path / "tiny.yaml"
    path.write_text(CONFIG + extra + "\n")
    with pytest.raises(ConfigError, match=rf"tiny\.yaml: {field}: expected"):
        load_experiment(path)


def test_a_demand_reads_combining_and_ranks_by_type(tmp_path, capsys):
    demand = tmp_path / "demand.yaml"
    out = str(tmp_path / "out.json")
    for text, field in (('pre: [[0, [0]]]\npost: [[0, [1]]]\ncombining: "no"\n', "combining"),
                        ("ranks: true\nmatrix: [[0]]\n", "ranks")):
        demand.write_text(text)
        assert main(["synth", "tacos", "--topology", "ring:4", "--demand", str(demand), "--size", "1MB",
                     "-o", out]) == 2
        assert f"{demand}: {field}: expected" in _one_line(capsys)


# ------------------------------------------------------------------------------ not regular files
@pytest.mark.parametrize("command, name", [("topology", "topo.yaml"), ("run", "config.yaml"),
                                           ("interpret", "plan.xml"), ("verify", "algo.json")])
def test_a_fifo_is_refused_without_blocking(tmp_path, capsys, command, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with deadline(5.0):
        assert main([command, str(fifo)]) == 2
    assert _one_line(capsys) == f"error: {fifo}: is a FIFO (named pipe), not a file"


def test_read_input_names_what_it_got(tmp_path):
    with pytest.raises(InputError, match="is a folder, not a file"):
        read_input(tmp_path)
    with pytest.raises(InputError, match="is a device, not a file"):
        read_input("/dev/null")
    with pytest.raises(InputError, match="no such topology file"):
        read_input(tmp_path / "missing.yaml", "topology file")
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"a: \xff\xfe")
    with pytest.raises(InputError, match=r"not a text file \(byte 3 is not utf-8\)"):
        read_input(binary)


# ------------------------------------------------------------------------------ depth and digits
@pytest.mark.parametrize("command, name", [("topology", "deep.json"), ("topology", "deep.yaml"),
                                           ("interpret", "plan.json"), ("verify", "algo.json")])
def test_nesting_200000_deep_is_one_line(tmp_path, capsys, command, name):
    path = tmp_path / name
    path.write_text("{" + '"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert main([command, str(path)]) == 2
    line = _one_line(capsys)
    assert str(path) in line and "nested" in line


def test_nesting_up_to_the_limit_reads():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(text, "x") == parse_yaml(text, "x")
    with pytest.raises(InputError, match="nested deeper than"):
        parse_json("[" + text + "]", "x")


def test_a_ring_of_100000_digits_is_one_line(capsys):
    assert main(["topology", "ring:" + "1" * 100_000]) == 2
    line = _one_line(capsys)
    assert "a number of 100,000 digits is too large" in line and len(line) < 200


@pytest.mark.parametrize("syntax", ["yaml", "json"])
def test_an_integer_of_100000_digits_in_a_file_is_one_line(tmp_path, capsys, syntax):
    path = tmp_path / f"topo.{syntax}"
    path.write_text('{"nodes": [{"id": ' + "1" * 100_000 + "}], \"links\": []}")
    assert main(["topology", str(path)]) == 2
    line = _one_line(capsys)
    assert str(path) in line and "integer" in line and len(line) < 200


# ------------------------------------------------------------------------------ MSCCL XML and plans
@pytest.mark.parametrize("xml", ["<algo><gpu", "<notalgo/>", '<algo ngpus="two" nchunksperloop="1"/>'])
def test_interpret_and_import_both_exit_2_on_a_file_that_is_not_msccl_xml(tmp_path, capsys, xml):
    path = tmp_path / "bad.xml"
    path.write_text(xml)
    assert main(["interpret", str(path)]) == 2
    assert str(path) in _one_line(capsys)
    assert main(["import", str(path), "--topology", "ring:4", "--size", "1MB",
                 "-o", str(tmp_path / "x.json")]) == 2
    assert str(path) in _one_line(capsys)
    assert not (tmp_path / "x.json").exists()


def test_a_plan_with_a_field_of_the_wrong_type_is_exit_2(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"collective": "allgather", "inplace": "no", "gpus": []}))
    assert main(["interpret", str(plan)]) == 2
    assert "field 'inplace' must be true or false" in _one_line(capsys)


# ------------------------------------------------------------------------------ report, sketch, --set
def test_a_string_where_report_expects_a_number(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text(CONFIG)
    row = {"cell_id": "ring:0", "kind": "schedule", "topology": "ring:4", "collective": "allgather",
           "size_bytes": 1e6, "chunks": 1, "formulation": "ring", "seed": 0, "status": "feasible",
           "collective_time": "fast"}
    (folder / "rows.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["report", str(folder), "--no-figures"]) == 2
    line = _one_line(capsys)
    assert "rows.jsonl: row of cell ring:0: collective_time: expected a number, got 'fast'" in line
    (folder / "rows.jsonl").write_text(json.dumps({**row, "collective_time": 1e-5}) + "\n")
    (folder / "run.json").write_text('{"quick": "no"}')
    assert main(["report", str(folder), "--no-figures"]) == 2
    assert "run.json: quick: expected true or false, got 'no'" in _one_line(capsys)


@pytest.mark.parametrize("target, expected", [("folder", "is a folder, not a file"),
                                              ("text", "expected a mapping at the top level"),
                                              ("missing", "no such file or shipped sketch")])
def test_a_sketch_path_that_is_not_a_sketch_is_exit_2(tmp_path, capsys, target, expected):
    text = tmp_path / "notes.txt"
    text.write_text("just some words\n")
    path = {"folder": tmp_path, "text": text, "missing": tmp_path / "none.yaml"}[target]
    out = tmp_path / "out.json"
    assert main(["synth", "taccl", "--topology", "ndv2:2", "--collective", "allgather", "--size", "1MB",
                 "-o", str(out), "--set", f"sketch={path}"]) == 2
    line = _one_line(capsys)
    assert line.startswith("error: --set sketch: sketch ") and expected in line
    assert not out.exists()


@pytest.mark.parametrize("value, expected", [("[[0,1],1]", r"[0]: expected [[[src, dst], ...], bandwidth]"),
                                             ('[[[[0,1]], "x"]]', "[0][1]: expected a whole number"),
                                             ("{a: 1, a: 2}", "a: duplicate key")])
def test_a_malformed_set_groups_is_exit_2(tmp_path, capsys, value, expected):
    assert main(["synth", "sccl", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB",
                 "-o", str(tmp_path / "out.json"), "--set", f"groups={value}"]) == 2
    assert expected in _one_line(capsys)


def test_set_values_that_are_not_yaml_stay_strings():
    from workbench.cli.synth import _parse_set

    assert _parse_set(["sketch=a: b: c", "steps=3", "x="]) == {"sketch": "a: b: c", "steps": 3, "x": ""}
