"""Every formulation shipped here, and the in-tree example, has the one shape the floor calls.

The shape (docs/adding-a-formulation.md): ``name``, ``kind``, ``options`` (an ``Options`` class) and
``synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None)``, nothing else passed
in; a module holds its declaration, options and ``synthesize`` in one file, a package holds the
declaration in ``__init__.py``, the options in ``options.py`` and the work in ``synthesis.py``; no
formulation stamps the runner's provenance; a problem it defines no schedule for is refused with
``Unsupported``, which the floor turns into one ``error`` row led by the formulation's name.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from workbench.model.collective import make_collective
from workbench.plugin import call
from workbench.plugin.catalogue import installed_names
from workbench.plugin.parameters import Options
from workbench.plugin.registry import Problem, get_formulation, resolve_formulation
from workbench.topology import build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "star:Star"  # examples/star/star.py, the one docs/adding-a-formulation.md builds
SHIPPED = installed_names()


def _formulation(name: str):
    if name == EXAMPLE:
        return resolve_formulation(EXAMPLE, ROOT / "examples" / "star")
    return get_formulation(name)


def _sources(formulation) -> list[Path]:
    """The files of a formulation: its module, or every module of its package."""
    path = Path(inspect.getfile(type(formulation)))
    return sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]


def test_every_entry_point_of_this_distribution_is_checked():
    assert len(SHIPPED) >= 18 and "libra" in SHIPPED and "bfs-trees" in SHIPPED


@pytest.mark.parametrize("name", [*SHIPPED, EXAMPLE])
def test_the_declaration_and_the_synthesize_signature(name):
    formulation = _formulation(name)
    assert isinstance(formulation.name, str) and formulation.kind in ("schedule", "design")
    assert isinstance(formulation.options, type) and issubclass(formulation.options, Options)
    parameters = list(inspect.signature(type(formulation).synthesize).parameters.values())
    assert [p.name for p in parameters] == ["self", "problem", "time_limit", "seed", "options", "on_incumbent"]
    assert parameters[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])
    assert parameters[-1].default is None
    assert all(p.default is inspect.Parameter.empty for p in parameters[2:-1])


@pytest.mark.parametrize("name", [*SHIPPED, EXAMPLE])
def test_the_parts_sit_where_the_shape_puts_them(name):
    formulation = _formulation(name)
    cls = type(formulation)
    path = Path(inspect.getfile(cls))
    if path.name != "__init__.py":  # a module: declaration, options and synthesize together
        assert inspect.getfile(formulation.options) == str(path) or formulation.options is Options
        return
    package = sys.modules[cls.__module__]
    assert (path.parent / "options.py").is_file() and (path.parent / "synthesis.py").is_file()
    assert formulation.options.__module__ == f"{package.__name__}.options"
    assert f"{package.__name__}.synthesis import synthesize" in inspect.getsource(cls.synthesize)
    functions = [n for n, v in vars(package).items() if inspect.isfunction(v) and v.__module__ == package.__name__]
    assert functions in ([], ["__getattr__"]), functions  # the declaration only: the work is in synthesis.py


PROVENANCE = re.compile(r"""meta\[["'](formulation|params|seed|synthesis_seconds)["']\]\s*=|"""
                        r"""meta\.update\(\{?\s*["']?(formulation|params|synthesis_seconds)["']?\s*[:=]""")


@pytest.mark.parametrize("name", [*SHIPPED, EXAMPLE])
def test_no_formulation_stamps_provenance_or_builds_its_own_options(name):
    for source in _sources(_formulation(name)):
        text = source.read_text()
        assert not PROVENANCE.search(text), f"{source}: provenance is the runner's to stamp"
        assert ".resolve(options" not in text and "from_params(" not in text, f"{source}: options are the floor's"


# a problem each formulation defines no schedule for: (topology, collective, params), or why there is none
REFUSED = {
    "bfs-trees": ("switch:4", "allreduce", {"switches": "multicast"}),
    "bruck": ("ring:4", "reduce", {}),
    "dbt": ("ring:4", "allgather", {}),
    "direct": ("ring:4", "reduce", {}),
    "forestcoll": ("ring:4", "alltoall", {}),
    "hierarchical": ("dgx1", "allgather", {}),
    "multipath": ("ring:4", "allgather", {}),
    "nvls": ("switch:4", "allreduce", {}),
    "oneshot": ("ring:4", "allgather", {}),
    "oneshot-hier": ("ring:4", "allgather", {}),
    "rd": ("ring:4", "reducescatter", {}),
    "pat": ("ring:4", "alltoall", {}),
    "rhd": ("ring:4", "alltoall", {}),
    "ring": ("ring:4", "alltoall", {}),
    "sccl": ("switch:4", "allgather", {"mode": "instance", "steps": 1, "rounds": 1}),
    "syccl": ("ring:4", "allgather", {}),
    "tacos": ("ring:4", "alltoall", {}),
    "teccl": ("ring:4", "allgather", {"symmetry": "dimensions"}),
    "two-level": ("ring:4", "allreduce", {}),
    EXAMPLE: ("ring:4", "allreduce", {}),
    "taccl": "defines every collective kind the workbench has (gather-like ones by its sketch, reductions by duality)",
    "libra": "a design formulation: its problem is input, and bad input is a ValueError naming the field",
}


def test_every_formulation_is_in_the_refusal_table():
    assert set(REFUSED) == {*SHIPPED, EXAMPLE}


@pytest.mark.parametrize("name", [n for n, case in REFUSED.items() if isinstance(case, tuple)])
def test_a_refused_problem_is_one_error_row_led_by_the_name(name):
    formulation = _formulation(name)
    spec, kind, params = REFUSED[name]
    topology = build(spec)
    root = 0 if kind in ("reduce", "broadcast", "gather", "scatter") else None
    problem = Problem(topology, make_collective(kind, topology.num_npus, 1, root), 1e6)
    result = call.synthesize(formulation, problem, time_limit=30, seed=0, **params)
    assert result.status == "error" and not result.algorithms
    assert result.message.startswith(formulation.name), result.message
    assert "Error:" not in result.message and "\n" not in result.message
