"""The model: the algorithm IR and its file formats (``algorithm``, ``typed_load``, ``periodic``),
collectives as pre/postconditions (``collective``) and the graph searches the topology uses
(``graphs``). Topologies themselves are the ``workbench.topology`` package, on the same layer."""
