"""Checking an algorithm: the semantic verifier (``verify``), the link-level simulator
(``simulate``) and race detection over concurrent programs (``happens_before``). Their compiled
twins for large algorithms are the ``workbench.compiled`` package."""
