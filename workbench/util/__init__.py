"""Utilities every layer may use: units, graph searches, atomic file writes, fast JSON, lazy
modules, safe reading of user files, a ``sys.path`` without the current folder, and the size guard that refuses oversized
requests before they are built. Nothing here imports another part of the workbench."""
