"""MSCCL XML: export, an interpreter that runs an XML file as the runtimes would, and import.

Format and runtime rules: ``../shared/spec/prior-art.md`` section 8 (the old ``<algo>/<gpu>/<tb>/<step>``
form that both the research runtime and the current executor parse).

Lowering (``export_xml``):

* buffers per collective: the input (``i``) and output (``o``) layouts of MSCCL (all-gather: own chunk
  j at i[j], chunk c at o[c]; reduce-scatter: c at i[c], own chunk j at o[j]; ...); a chunk a rank
  holds on the way but does not keep lives in scratch (``s``); a chunk that starts in the input
  and is written (kept, or reduced into) is first copied by a ``cpy`` step;
* one threadblock per send peer (``send=peer``), one per receive peer (``recv=peer``) and one for
  local copies, all on channel 0 (``--instances N`` splits every chunk in N and runs instance i on
  channel i); a transfer is a send step and a receive step (``r``, or ``rrc`` for a reduction);
  multi-chunk messages are ``cnt > 1``; a message whose chunks are not contiguous in both buffers is
  sent as one step per contiguous run;
* fusion (default): a receive threadblock and the send threadblock that forwards its data merge
  into one (``recv=u send=x``, steps in plan order), and a receive immediately followed by the send
  that waits only on it becomes one ``rcs`` (``rrcs`` after a reduction) step. A fused threadblock
  runs its steps one after the other, so its timing can differ from the plan; ``fuse=False`` keeps
  them apart and import then reproduces the plan exactly;
* dependencies: a step waits on the steps of its transfer's deps that live on its rank; more than
  one becomes a chain of ``nop`` steps (one dependency per step); ``hasdep`` marks waited-on steps;
* each send/receive step carries ``wbid`` (the transfer id), which the runtimes ignore and import
  uses to restore the plan order;
* the runtimes' limits (steps per threadblock, threadblocks per gpu and per channel, ``cnt``) are
  checked and named when an algorithm cannot be lowered as is.

``interpret`` executes an XML over contribution sets: every threadblock runs its steps in order, a
FIFO per (sender, receiver, channel) carries messages, a step waits for its dependency; it reports a
deadlock, a send/receive mismatch or a missing postcondition with rank, threadblock and step.
``import_xml`` runs the interpreter while tracking which chunk each buffer slot holds and turns every
matched send/receive into a transfer.
"""

from workbench.msccl.common import LIMITS, MscclError
from workbench.msccl.export import export_xml
from workbench.msccl.importer import import_xml
from workbench.msccl.layout import refine
from workbench.msccl.run import interpret

__all__ = ["MscclError", "export_xml", "interpret", "import_xml", "LIMITS", "refine"]
