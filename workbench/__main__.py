"""``python -m workbench``: the command line, with the current folder taken off ``sys.path`` first
(``-m`` put it there; the ``workbench`` script never has it; see ``workbench.util.safe_path``)."""

import sys

from workbench.util.safe_path import safe_sys_path

if not sys.flags.safe_path:
    sys.path[:] = safe_sys_path(sys.path)

from workbench.cli import main  # noqa: E402  (after sys.path is clean)

sys.exit(main())
