"""MSCCL++ execution plans: export (``export.export_plan``) and an interpreter (``run.interpret_plan``).

MSCCL++ (microsoft/mscclpp) runs JSON execution plans with its executor and its NCCL shim; it has no
synthesizer of its own. The schema followed is that of mscclpp 0.9 (``PLAN_SCHEMA``); transfers
through an NVSwitch that reduces are written as NVLS switch-channel operations (``nvls``).
"""

from workbench.mscclpp.export import PLAN_SCHEMA, export_plan
from workbench.mscclpp.run import interpret_plan, parse_plan

__all__ = ["export_plan", "interpret_plan", "parse_plan", "PLAN_SCHEMA"]
