"""The formulations catalogue, ``docs/formulations.md``, written from what the formulations declare.

``formulations_markdown()`` reads every formulation installed under the ``workbench.formulations``
entry points (through the registry, as ``workbench formulations`` does: the workbench never imports a
formulation by module name) and writes one Markdown page:

* a summary table: name, kind, what it does (the first sentence of its module's docstring, or of
  its class's or builder's where one module holds several formulations), the method notes
  its module docstring names (``docs/methods/<note>.md``) and how many parameters it declares; two
  optional one-line class attributes, ``collectives`` and ``paper``, add a column each once any
  formulation declares them;
* one section per formulation: its declared parameters (``workbench.plugin.parameters``) with the
  accepted values, the default and the declared help.

The page is regenerated with ``python -m workbench.plugin.catalogue > docs/formulations.md``;
``tests/test_docs_generated.py`` fails while the committed page differs. The prose that is not
about one formulation is ``HEADER`` below.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections import Counter
from typing import Any, Iterable

from workbench.plugin.installed import entry_points
from workbench.plugin.parameters import RUNNER_KEYS, Parameter, declared_parameters
from workbench.plugin.registry import ENTRY_POINT_GROUP, FormulationError, get_formulation

__all__ = ["COMMAND", "HEADER", "formulations_markdown", "installed_names"]

COMMAND = "python -m workbench.plugin.catalogue > docs/formulations.md"

HEADER = f"""# Formulations

<!-- Generated from the formulations' own declarations; edit those, not this page. -->

Every installed formulation and the parameters it declares, written from the declarations
themselves (`workbench formulations NAME` prints the same). What a method does and which reading of
its paper the code follows is in its method note ([methods/](methods/README.md)); which collectives
each covers, in one line, is the README's [table](../README.md#formulations). Adding one:
[adding-a-formulation.md](adding-a-formulation.md). The words for optimality and time limits:
[glossary.md](glossary.md).

Every formulation also takes the runner's {", ".join(f"`{key}`" for key in RUNNER_KEYS)}: seconds, or a duration such as `20s`
([glossary](glossary.md#time-limit)).

Regenerate this page with `{COMMAND}`
(`tests/test_docs_generated.py` fails while it differs); the prose above is `HEADER` in
`workbench/plugin/catalogue.py`.
"""

_NOTE = re.compile(r"docs/methods/([A-Za-z0-9_-]+)\.md")
_ASIDE = re.compile(r"\s*\((?:see )?(?:the )?module docstring\)|\s*\(formulation ``[^`]+``\)")


DISTRIBUTION = "collective-workbench"  # the page lists this project's formulations, not other plug-ins


def installed_names() -> list[str]:
    """The names of this project's ``workbench.formulations`` entry points, sorted, each once (a
    plug-in another package installs beside it is not on the page)."""
    return sorted({entry.name for entry in entry_points(ENTRY_POINT_GROUP) if _ours(entry)})


def _ours(entry: Any) -> bool:
    dist = getattr(entry, "dist", None)
    return dist is None or dist.metadata["Name"] == DISTRIBUTION


def _cell(text: str) -> str:
    """One Markdown table cell: one line, reST literals as Markdown code, pipes escaped."""
    return " ".join(str(text).split()).replace("``", "`").replace("|", "\\|")


def _first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())
    paragraph = _ASIDE.sub("", paragraph)
    sentence = re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0]
    return sentence.rstrip(".").strip()


def _module_doc(formulation: Any) -> str:
    """The docstring of the module the formulation's class is defined in ('' when there is none)."""
    module = sys.modules.get(type(formulation).__module__)
    return (getattr(module, "__doc__", None) or "") if module is not None else ""


def _summary(formulation: Any, shares_module: bool) -> str:
    """What the formulation does, in one sentence: its module's summary line when the module is its
    own, else its class's own docstring, else (a rule-built formulation) its builder's."""
    cls = type(formulation)
    builder = getattr(cls, "builder", None)
    candidates = [] if shares_module else [_module_doc(formulation)]
    candidates += [vars(cls).get("__doc__"), inspect.getdoc(builder) if inspect.isfunction(builder) else None,
                   _module_doc(formulation)]
    return next((sentence for sentence in map(_first_sentence, candidates) if sentence), "")


def _declared_line(formulation: Any, attribute: str) -> str | None:
    """A one-line declaration (``collectives``, ``paper``): a string, or a tuple of strings joined."""
    value = getattr(formulation, attribute, None)
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return None


def _notes(formulation: Any) -> str:
    """Links to the method notes the module docstring names, each once, in the order named."""
    names = dict.fromkeys(_NOTE.findall(_module_doc(formulation)))
    return ", ".join(f"[{name}](methods/{name}.md)" for name in names) or "-"


def _value(value: Any) -> str:
    """A default as an experiment's YAML writes it (null, true, false, the number, the string)."""
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _parameter_rows(declared: tuple[Parameter, ...]) -> list[str]:
    """The parameter table of one formulation (or the line saying it takes none)."""
    if not declared:
        return ["No parameters."]
    rows = ["| parameter | accepts | default | what |", "|---|---|---|---|"]
    rows += [f"| `{p.name}` | {_cell(p.expected())} | {_value(p.default)} | {_cell(p.help)} |" for p in declared]
    return rows


def formulations_markdown(names: Iterable[str] | None = None) -> str:
    """The catalogue page (module docstring) for ``names`` (default: every installed entry point)."""
    names = installed_names() if names is None else list(names)
    loaded: dict[str, Any] = {}
    broken: dict[str, str] = {}
    for name in names:
        try:
            loaded[name] = get_formulation(name)
        except FormulationError as exc:  # a plug-in that does not load is a row saying why
            broken[name] = str(exc)
    modules = Counter(type(f).__module__ for f in loaded.values())
    summaries = {name: _cell(_summary(f, modules[type(f).__module__] > 1)) for name, f in loaded.items()}
    extras = [a for a in ("collectives", "paper") if any(_declared_line(f, a) for f in loaded.values())]
    head = ["name", "kind", "what", *extras, "method notes", "parameters"]
    lines = [HEADER, "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        if name in broken:
            lines.append(f"| `{name}` | | failed to load: {_cell(broken[name])} |" + " |" * (len(head) - 3))
            continue
        formulation = loaded[name]
        declared = declared_parameters(formulation)
        cells = [f"[`{name}`](#{_anchor(name)})", formulation.kind, summaries[name]]
        cells += [_cell(_declared_line(formulation, a) or "-") for a in extras]
        cells += [_notes(formulation), str(len(declared))]
        lines.append("| " + " | ".join(cells) + " |")
    for name, formulation in loaded.items():
        lines += ["", f"## `{name}`", "",
                  f"{summaries[name]} ({formulation.kind}; method notes: {_notes(formulation)}).", ""]
        lines += _parameter_rows(declared_parameters(formulation))
    return "\n".join(lines) + "\n"


def _anchor(name: str) -> str:
    """The anchor a Markdown renderer gives the heading ``## `name```."""
    return re.sub(r"[^\w\- ]", "", name.lower()).replace(" ", "-")


if __name__ == "__main__":
    sys.stdout.write(formulations_markdown())
