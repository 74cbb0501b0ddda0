"""Pages written from declarations stay what their generator writes.

``docs/formulations.md`` is ``workbench.plugin.catalogue.formulations_markdown()``: each installed
formulation's kind, summary, method notes and declared parameters. A changed declaration (a new
parameter, another default, a reworded help) fails here until the page is regenerated.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.plugin import registry
from workbench.plugin.catalogue import COMMAND, formulations_markdown, installed_names
from workbench.plugin.parameters import Options, option

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "formulations.md"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def test_the_formulations_page_is_the_generators_output():
    expected = formulations_markdown()
    written = PAGE.read_text()
    if written != expected:
        diff = "\n".join(list(difflib.unified_diff(written.splitlines(), expected.splitlines(), "docs/formulations.md",
                                                   "generated", lineterm="", n=0))[:12])
        pytest.fail(f"docs/formulations.md differs from the formulations' declarations; regenerate it (from the "
                    f"repository's root): {COMMAND}\n{diff}")


def test_every_installed_formulation_has_a_row_and_a_section():
    page = formulations_markdown()
    for name in installed_names():
        assert f"| [`{name}`](#{name}) |" in page
        assert f"\n## `{name}`\n" in page


def test_every_table_row_is_one_line_with_its_header_s_cells():
    columns = None
    for line in formulations_markdown().splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = len(UNESCAPED_PIPE.findall(line))
        columns = columns or cells
        assert cells == columns, line


@dataclass(frozen=True)
class _ExampleOptions(Options):
    width: int = option(2, "how wide | how far", minimum=1)
    mode: str | None = option(None, "which ``mode``", types=("str", "none"), choices=("a", "b"))


class _Declared:
    """Example schedules.

    More than the first paragraph is not shown."""

    name, kind, options = "example-declared", "schedule", _ExampleOptions
    collectives = ("AG", "RS by duality")
    paper = "A. Author, \"Example\", 2025"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        """Nothing (never called here)."""
        raise NotImplementedError


class _Undeclared:
    name, kind = "example-undeclared", "design"

    def synthesize(self, problem, *, time_limit, seed, options, on_incumbent=None):
        """Nothing (never called here)."""
        raise NotImplementedError


@pytest.fixture
def examples():
    registry.register(_Declared)
    registry.register(_Undeclared)
    yield
    registry.unregister("example-declared")
    registry.unregister("example-undeclared")


def test_declared_collectives_paper_and_parameters_are_written(examples):
    page = formulations_markdown(["example-declared", "example-undeclared"])
    assert "| name | kind | what | collectives | paper | method notes | parameters |" in page
    assert "| AG, RS by duality | A. Author, \"Example\", 2025 |" in page
    assert "| `width` | an integer >= 1 | `2` | how wide \\| how far |" in page
    assert "| `mode` | 'a' or 'b' or null | `null` | which `mode` |" in page
    assert "Example schedules (schedule;" in page and "More than" not in page
    assert "No parameters." in page
    assert "| [`example-undeclared`](#example-undeclared) | design |" in page and "| - | - |" in page


def test_without_collectives_or_paper_declared_the_columns_are_left_out(examples):
    page = formulations_markdown(["example-undeclared"])
    assert "| name | kind | what | method notes | parameters |" in page


def test_a_formulation_that_does_not_load_is_a_row_saying_why():
    page = formulations_markdown(["no-such-formulation"])
    row = next(line for line in page.splitlines() if line.startswith("| `no-such-formulation`"))
    assert "failed to load: unknown formulation 'no-such-formulation'" in row
    assert len(UNESCAPED_PIPE.findall(row)) == 6
