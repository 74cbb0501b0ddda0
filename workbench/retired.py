"""Module names that left in 0.2: importing one fails at once with an error naming its new home.

``workbench.runner`` became ``workbench.run.runner``, ``workbench.simulate``
``workbench.checking.simulate``, and so on (``RETIRED``: old leaf name -> new name under
``workbench``). Each old name is a two-line module in ``workbench/_retired/``, a folder on the
package's ``__path__`` (plain package search, no import hook), that calls ``refuse``. The names stay for this release only and go in the next.
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["RETIRED", "refuse"]

RETIRED = {
    "graph": "topology.graph", "builders": "topology.builders", "systems": "topology.systems",
    "edge_lists": "topology.edge_lists", "fabrics": "topology.fabrics",
    "experiment": "config.experiment", "config_checks": "config.checks", "runner": "run.runner",
    "cell": "run.cell", "cell_monitor": "run.monitor", "cell_work": "run.evaluate", "messages": "run.wire",
    "progress": "run.progress", "run_folder": "run.folder", "run_lock": "run.lock", "rebound": "run.rebound",
    "cli_common": "cli.common", "cli_runs": "cli.runs", "cli_runtimes": "cli.runtimes", "cli_synth": "cli.synth",
    "compiled_verify": "compiled.verify", "compiled_simulate": "compiled.simulate",
    "transfer_arrays": "compiled.arrays", "engines": "compiled.engines",
    # 0.2: the loose modules grouped by role
    "algorithm": "model.algorithm", "alpha_beta": "bounds.alpha_beta", "closed_form": "plugin.closed_form",
    "cluster_translations": "kit.cluster_translations", "collective": "model.collective",
    "deadline": "kit.deadline", "duality": "kit.duality", "examples": "kit.examples",
    "fastjson": "util.fastjson", "files": "util.files", "flow_lp": "bounds.flow_lp",
    "flow_routes": "bounds.flow_routes", "graphs": "util.graphs", "group_cuts": "bounds.group_cuts",
    "happens_before": "checking.happens_before", "lazy": "util.lazy", "maxflow": "kit.maxflow",
    "milp": "kit.milp", "milp_expressions": "kit.milp_expressions", "optimum": "bounds.optimum",
    "parameters": "plugin.parameters", "periodic": "model.periodic", "plots": "reports.plots",
    "registry": "plugin.registry", "report": "reports.report", "report_bounds": "reports.report_bounds",
    "results": "reports.results", "row_check": "reports.row_check",
    "safe_load": "util.safe_load", "safe_path": "util.safe_path", "schedule": "kit.schedule",
    "simulate": "checking.simulate", "size_guard": "util.size_guard", "solvers": "kit.solvers",
    "symmetry": "kit.symmetry", "time_expanded": "bounds.time_expanded", "tune": "run.tune",
    "typed_load": "model.typed_load", "units": "util.units", "verify": "checking.verify",
    "yardstick": "bounds.yardstick",
}


def refuse(old: str) -> NoReturn:
    """Raise the ImportError that names ``old``'s new module (``old``: the stub's module name)."""
    new = f"workbench.{RETIRED[old.rpartition('.')[2]]}"
    raise ImportError(f"{old} moved to {new} (workbench 0.2): import {new} instead", name=old)
