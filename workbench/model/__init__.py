"""The model: the algorithm IR (``algorithm``, ``transfer``, ``periodic``) and its file formats
(``algorithm_format`` the document, ``algorithm_io`` the files, ``typed_load`` the fast reader), and
collectives as pre/postconditions (``collective``). Topologies themselves are the
``workbench.topology`` package, on the same layer."""
