"""Collective-communication algorithm synthesis workbench: one IR, one verifier, one simulator."""

import os as _os

__version__ = "0.2.0"

# Module names retired in 0.2 answer with an ImportError naming their new home (workbench.retired);
# their stubs live in a folder of their own on the package's search path, out of the floor's way.
__path__.append(_os.path.join(_os.path.dirname(__file__), "_retired"))
