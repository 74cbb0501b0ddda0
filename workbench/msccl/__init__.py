"""MSCCL XML: export, an interpreter that runs an XML file as the runtimes would, and import.

Format and runtime rules: ``docs/msccl.md`` (the old ``<algo>/<gpu>/<tb>/<step>`` form that both the
research runtime and the current executor parse).

Lowering (``export_xml``):

* buffers: NCCL's rank-major layout, as msccl-tools writes it (``layout.buffer_layout``): the IR's
  chunk ``j * N + r`` (chunk j of rank r) sits at index ``r * k + j`` of a full buffer. All-Gather:
  own chunk j at i[j], rank r's chunk j at o[r*k + j]; Reduce-Scatter: i[r*k + j] on every rank,
  own o[j]; All-Reduce: i and o[r*k + j]; All-to-All: piece j from s to d at i[d*k + j] on s and
  o[s*k + j] on d; scatter and gather like Reduce-Scatter's input and All-Gather's output;
  broadcast and reduce: chunk j at j. A chunk a rank holds on the way but does not keep lives in
  scratch (``s``, indexed like a full output); a chunk that starts in the input and is written
  (kept, or reduced into) is first copied by a ``cpy`` step;
* one threadblock per send peer (``send=peer``), one per receive peer (``recv=peer``) and one for
  local copies, all on channel 0 (``--instances N`` splits every chunk in N and runs instance i on
  channel i); a transfer is a send step and a receive step (``r``, or ``rrc`` for a reduction),
  whose peer fields name each other's slots as msccl-tools fills them (a send's ``dstbuf/dstoff``
  is the receiver's slot, a receive's ``srcbuf/srcoff`` the sender's; ``rrc`` adds its local
  ``src`` to what arrives and writes ``dst``, as the runtime's recvReduceCopy);
  multi-chunk messages are ``cnt > 1``; a message whose chunks are not contiguous in both buffers is
  sent as one step per contiguous run;
* fusion (default): a receive threadblock and the send threadblock that forwards its data merge
  into one (``recv=u send=x``, steps in plan order), and a receive immediately followed by the send
  that waits only on it becomes one ``rcs`` (``rrcs`` after a reduction) step. A fused threadblock
  runs its steps one after the other, so its timing can differ from the plan; ``fuse=False`` keeps
  them apart and import then reproduces the plan exactly;
* dependencies: a step waits on the steps of its transfer's deps that live on its rank, and on the
  steps of other threadblocks that touched its slots before it in plan order (write after write,
  write after read, read after write), since threadblocks run concurrently on a GPU; more than one
  becomes a chain of ``nop`` steps (one dependency per step); ``hasdep`` marks waited-on steps;
* a reduction that could overlap another threadblock's reduction into the same slot (partial sums
  from two neighbours) lands in fresh scratch and is added by a local ``re`` step once the other is
  done, so the network transfers keep the plan's timing without a read-modify-write race;
* each send/receive step carries ``wbid`` (the transfer id), which the runtimes ignore and import
  uses to restore the plan order;
* one file for in-place and out-of-place calls (``inplace="1" outofplace="1"``): the hazards above
  key a slot as it is in both aliasings (``layout.in_place_slot``), and a value a send needs after
  its slot may change is kept in scratch (``kept``: the input, the value after a transfer, what a
  reduction brought), as is an input an in-place call would overwrite first (All-to-All);
* the runtimes' limits (steps per threadblock, threadblocks per gpu and per channel, ``cnt``) are
  checked and named when an algorithm cannot be lowered as is.

``interpret`` first reads what the file declares (``validate``: the size guard on ``ngpus``,
``nchunksperloop``, buffer sizes and steps; every rank, channel, threadblock, step and buffer slot it
names must exist, and the buffers must have the collective's sizes), then, for each aliasing the file declares, analyses every
interleaving at once (``races``: happens-before from program
order, dependencies and message order; two unordered accesses to one slot, one a write, are a race
named by both steps), then executes the XML over contribution sets: every threadblock runs its steps
in order, a FIFO per (sender, receiver, channel) carries messages, a step waits for its dependency;
it reports a deadlock, a send/receive mismatch, peer fields that disagree or a missing postcondition
with rank, threadblock and step. ``schedules=N`` adds N runs in random interleavings.
``import_xml`` runs the interpreter while tracking which chunk each buffer slot holds and turns every
matched send/receive into a transfer (a send of a kept value into one that reads an earlier value).
"""

from workbench.msccl.common import LIMITS, MscclError
from workbench.msccl.export import export_xml
from workbench.msccl.importer import import_xml
from workbench.msccl.layout import refine
from workbench.msccl.run import interpret

__all__ = ["MscclError", "export_xml", "interpret", "import_xml", "LIMITS", "refine"]
