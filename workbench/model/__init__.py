"""The model: the algorithm IR and its file formats (``algorithm``, ``typed_load``, ``periodic``),
and collectives as pre/postconditions (``collective``). Topologies themselves are the
``workbench.topology`` package, on the same layer."""
