"""Declared formulation parameters: checked before any cell, one line naming the key, exit 2."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from workbench.plugin import call
from workbench.cli import main
from workbench.plugin.parameters import Options, ParameterError, check_parameters, declared_parameters, option
from workbench.plugin.registry import available_formulations, get_formulation

GRID = """name: {name}
grid:
  topologies: [ring:8]
  collectives: [{collective}]
  sizes: [1MB]
  formulations:
    - {{name: {formulation}, params: {params}}}
"""


def _write(tmp_path, name="bad", collective="allgather", formulation="tacos", params="{}"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(GRID.format(name=name, collective=collective, formulation=formulation, params=params))
    return path


@pytest.mark.parametrize("name", available_formulations())
def test_every_shipped_formulation_declares_its_parameters(name):
    formulation = get_formulation(name)
    declared = declared_parameters(formulation)
    assert declared is not None, name
    names = [p.name for p in declared]
    assert len(names) == len(set(names))
    for parameter in declared:  # every default is an accepted value
        assert parameter.accepts(parameter.default), (name, parameter.name, parameter.default)


@pytest.mark.parametrize("params, fragment", [
    ("{restartz: 8}", "params.restartz: tacos has no parameter 'restartz' (accepted: chunks, engine, replacement, restarts"),
    ("{restarts: abc}", "params.restarts: expected an integer >= 1, got 'abc'"),
    ("{restarts: 0}", "params.restarts: expected an integer >= 1, got 0"),
    ("{replacement: sideways}", "params.replacement: expected 'causal' or 'reference' or 'off'"),
])
def test_a_config_with_a_bad_parameter_exits_2_before_any_cell(tmp_path, capsys, params, fragment):
    config = _write(tmp_path, params=params)
    results = tmp_path / "results"
    assert main(["run", str(config), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(config) in err[0] and "grid.formulations[0]" in err[0] and fragment in err[0], err
    assert not results.exists()


def test_a_root_that_is_not_a_rank_exits_2(tmp_path, capsys):
    config = _write(tmp_path, collective="{kind: broadcast, root: 99}")
    assert main(["run", str(config), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {config}: grid.collectives[0].root: 99 is not a rank of ring:8 (0..7)"]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("setting, fragment", [
    ("restartz=8", "--set restartz: tacos has no parameter"),
    ("restarts=abc", "--set restarts: expected an integer >= 1, got 'abc'"),
])
def test_synth_set_is_checked_before_synthesis(tmp_path, capsys, setting, fragment):
    out = tmp_path / "a.json"
    argv = ["synth", "tacos", "--topology", "ring:8", "--collective", "allgather", "--size", "1MB",
            "--set", setting, "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_teccl_epochs_must_be_positive_at_the_cli(tmp_path, capsys):
    argv = ["synth", "teccl", "--topology", "ring:4", "--collective", "allgather", "--size", "1MB",
            "--set", "epochs=-5", "-o", str(tmp_path / "a.json")]
    assert main(argv) == 2
    assert "--set epochs: expected an integer >= 1 or null, got -5" in capsys.readouterr().err


class Undeclared:
    """A researcher's formulation without an ``options`` declaration: it takes no parameters."""

    name = "undeclared"
    kind = "schedule"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        from workbench.plugin.registry import get_formulation as lookup

        return call.synthesize(lookup("ring"), problem, time_limit=time_limit, seed=seed, on_incumbent=on_incumbent)


def test_an_undeclared_formulation_runs_and_refuses_parameters(tmp_path, capsys):
    out = tmp_path / "a.json"
    argv = ["synth", f"{__name__}:Undeclared", "--topology", "ring:4", "--collective", "allgather",
            "--size", "1MB", "-o", str(out)]
    assert main(argv) == 0
    assert out.exists()
    refused = tmp_path / "b.json"
    assert main([*argv[:-2], "--set", "anything=3", "-o", str(refused)]) == 2
    assert "--set anything: undeclared has no parameter 'anything' (accepted: none)" in capsys.readouterr().err
    assert not refused.exists()


def test_formulations_name_shows_the_declarations(capsys):
    assert main(["formulations", "tacos"]) == 0
    text = capsys.readouterr().out
    for parameter in declared_parameters(get_formulation("tacos")):
        assert parameter.name in text and parameter.help in text


@dataclass(frozen=True)
class CountOrAuto(Options):
    p: int | str = option(1, "", choices=("auto",), minimum=1)


@given(st.one_of(st.integers(-10, 10), st.floats(allow_nan=True), st.text(max_size=5), st.booleans(), st.none()))
def test_accepts_matches_the_declared_kinds(value):
    (parameter,) = CountOrAuto.parameters()
    expected = ((isinstance(value, int) and not isinstance(value, bool) and value >= 1) or value == "auto")
    assert parameter.accepts(value) == expected
    if not expected:
        with pytest.raises(ParameterError, match="where.p: expected an integer >= 1 or 'auto'"):
            check_parameters(type("F", (), {"name": "f", "options": CountOrAuto})(), {"p": value}, "where")
