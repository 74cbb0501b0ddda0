"""Commands a formulation adds through the ``workbench.commands`` entry points: listed by ``--help``,
run like the floor's own, and a broken one costs a one-line warning, not the command line."""

import argparse
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

import workbench.cli as cli


def register_hello(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hello", help="say hello")
    p.set_defaults(func=lambda args: print("hello") or 0)


def register_half(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("half", help="registered, then the register fails")
    raise RuntimeError("broken on purpose")


def test_libra_is_a_formulation_command():
    (entry,) = [e for e in cli.command_entry_points() if e.name == "libra"]
    assert entry.value == "formulations.libra.cli:register"


def test_help_lists_libra_and_builds_no_formulation():
    code = ("import sys, workbench.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('formulations')))\n"
            "print('numpy' in sys.modules, 'workbench.plugin.registry' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "libra" in out and "LIBRA: per-dimension bandwidth" in out
    assert "['formulations', 'formulations.libra', 'formulations.libra.cli', 'formulations.libra.options']" in out
    assert out.splitlines()[-1].startswith("False")  # no numpy for --help


@pytest.mark.parametrize("broken", [
    EntryPoint("gone", "no_such_module:register", cli.COMMAND_GROUP),
    EntryPoint("half", f"{__name__}:register_half", cli.COMMAND_GROUP),
    EntryPoint("clash", f"{__name__}:register_clash", cli.COMMAND_GROUP),
    EntryPoint("option", f"{__name__}:register_option_clash", cli.COMMAND_GROUP),
    EntryPoint("exits", f"{__name__}:register_exit", cli.COMMAND_GROUP),
])
def test_a_broken_command_is_skipped_with_one_line(monkeypatch, capsys, broken):
    hello = EntryPoint("hello", f"{__name__}:register_hello", cli.COMMAND_GROUP)
    monkeypatch.setattr(cli, "command_entry_points", lambda: [broken, hello])
    assert cli.main(["hello"]) == 0
    out, err = capsys.readouterr()
    assert out == "hello\n"
    (line,) = err.splitlines()
    assert line.startswith(f"warning: command entry point {broken.name!r}") and "skipped" in line
    assert cli.main(["topology", "ring:4"]) == 0  # the floor's commands are untouched
    assert cli.main(["half"]) == 2  # a half-registered command is taken back out
    assert "invalid choice: 'half'" in capsys.readouterr().err


def register_clash(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("synth", help="a name the floor already has")


def register_option_clash(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="defines an option every command gets from the floor")
    p.add_argument("--max-memory")


def register_exit(sub: argparse._SubParsersAction) -> None:
    raise SystemExit("a plug-in that exits while registering")
