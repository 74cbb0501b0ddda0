"""The ``workbench`` command line (also ``python -m workbench``): one module per command group.

Exit codes (the README's table): 0 done, 1 a well-formed algorithm that is not valid (``verify``,
``simulate``, ``export``, ``interpret``), 2 bad input (unknown builder, malformed or binary file,
missing field, bad argument, a busy run folder, an output path that cannot take the file: a FIFO,
a folder, a full device; checked before any work), 3/4/5 ``synth`` infeasible / timed out / failed,
1 also for ``tune`` when a bucket has no runtime file, 5 also for any unexpected error (one line; ``--debug`` shows the traceback), 130 interrupted; errors
are one line on stderr.

Groups: ``files`` (topology, builders, verify, simulate, bounds, formulations), ``synth``, ``runs``
(run, report, rebound), ``runtimes`` (MSCCL XML, MSCCL++ plans), ``tune`` (per-size bundles). Each group's module imports only
light modules at its top and the rest when its command runs, so ``--help`` stays fast.

A formulation adds its own commands through the ``workbench.commands`` entry points, read after the
workbench's groups (``libra`` is LIBRA's): each names a ``register(sub)`` that adds subparsers, in a
module that imports only argparse-level things at its top. One that fails to load or register is
left out with a one-line warning (so is one whose command name is taken); the other commands work.

    [project.entry-points."workbench.commands"]
    mine = "my_package.cli:register"
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

from workbench.cli import files, runs, runtimes, synth, tune
from workbench.cli.common import Parser, UsageError, add_topology_arguments, topology_from_args
from workbench.util.units import UnitError, parse_size

__all__ = ["main", "UsageError", "topology_from_args", "add_topology_arguments", "COMMAND_GROUP"]

COMMAND_GROUP = "workbench.commands"


def _build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="workbench", description="Collective-algorithm synthesis workbench")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for group in (files, synth, runs, runtimes, tune):
        group.register(sub)
    files.register_formulations(sub)
    for command in sub.choices.values():
        _add_common_options(command)
    _register_commands(sub)
    return parser


def _add_common_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--max-memory", metavar="SIZE",
                         help="memory budget of the size guard (default 80%% of the machine's), e.g. 40GB")


def command_entry_points() -> list:
    """The installed ``workbench.commands`` entry points (read once per command: the parser lists them)."""
    from workbench.plugin.installed import entry_points

    return entry_points(COMMAND_GROUP)


def _register_commands(sub: argparse._SubParsersAction) -> None:
    """The ``workbench.commands`` entry points, each ``register(sub)``; a broken one (it fails to
    load or to register, takes a command name already taken, or clashes with the common options)
    is skipped with a one-line warning and leaves no parser behind."""
    for entry in command_entry_points():
        before = dict(sub.choices)
        try:
            entry.load()(sub)
            for name in set(sub.choices) - set(before):
                _add_common_options(sub.choices[name])
        except (Exception, SystemExit) as exc:  # a broken plug-in must not take the whole command line down
            for name in set(sub.choices) - set(before):  # half-registered: take its parsers back out
                del sub.choices[name]
            sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest in before]
            print(f"warning: command entry point {entry.name!r} ({entry.value}) skipped: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)


def _input_errors() -> tuple[type[BaseException], ...]:
    from workbench.model.algorithm import AlgorithmFormatError
    from workbench.model.collective import CollectiveError
    from workbench.config.experiment import ConfigError
    from workbench.util.files import OutputError
    from workbench.plugin.registry import FormulationError
    from workbench.reports.report import ReportError
    from workbench.util.safe_load import InputError
    from workbench.util.size_guard import SizeError
    from workbench.topology import TopologyError

    return (UsageError, TopologyError, CollectiveError, AlgorithmFormatError, UnitError, ConfigError,
            FormulationError, ReportError, SizeError, OutputError, InputError)


def _apply_max_memory(text: str | None) -> None:
    """``--max-memory``: this process's size-guard budget, inherited by the cells it starts."""
    from workbench.util import size_guard

    if text is None:
        size_guard.set_budget(None)
        return
    try:
        value = parse_size(text)
    except UnitError as exc:
        raise UsageError(f"--max-memory: {exc}") from None
    if not value > 0:
        raise UsageError(f"--max-memory: must be positive, got {text!r}")
    size_guard.set_budget(value)
    os.environ[size_guard.BUDGET_ENV] = repr(value)


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM (a batch scheduler, `kill`) takes the same path as Ctrl-C


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``workbench`` command line on ``argv`` (default ``sys.argv[1:]``); the exit code: the
    command's own, 2 for bad input, 5 for an unexpected error, 130 when interrupted."""
    import signal
    import threading

    from workbench.util.size_guard import BUDGET_ENV

    entered = time.time()  # a command's time limit counts from its start (synth: _command_start)
    parser = _build_parser()
    args = None
    previous = None
    inherited_budget = os.environ.get(BUDGET_ENV)  # --max-memory sets it for this call's cells only
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        _apply_max_memory(getattr(args, "max_memory", None))
        args.entered = entered
        return int(args.func(args) or 0)
    except SystemExit:  # --help: not an error; evaluating _input_errors() would import ~40 ms of modules
        raise
    except _input_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except IsADirectoryError as exc:
        print(f"error: {exc.filename}: is a folder, not a file", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a binary file where text (JSON, YAML, XML) was expected
        named = next((str(getattr(args, k)) for k in ("file", "config", "demand", "topology")
                      if isinstance(getattr(args, k, None), str) and os.path.isfile(getattr(args, k))), "the input")
        print(f"error: {named}: not a text file (byte {exc.start} is not {exc.encoding})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`workbench formulations | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's flush at exit too
        return 0
    except MemoryError:
        print("error: out of memory (lower the problem size or raise --max-memory only if the machine has it)",
              file=sys.stderr)
        return 5
    except Exception as exc:  # the one catch-all at the boundary: one line, not a traceback
        if getattr(args, "debug", False):
            raise
        first = (str(exc).splitlines() or [""])[0]
        print(f"error: {type(exc).__name__}: {first} (re-run with --debug for the traceback)", file=sys.stderr)
        return 5
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if inherited_budget is None:
            os.environ.pop(BUDGET_ENV, None)
        else:
            os.environ[BUDGET_ENV] = inherited_budget
