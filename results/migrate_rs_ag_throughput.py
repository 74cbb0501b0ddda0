"""One-off rewrite of the committed results for the renamed All-Reduce figure.

``achievable`` (RS* + AG*) is now ``rs_ag_throughput``: it is not a time known to be reached (at
small sizes it lies below the bounds). In every ``rows.jsonl`` the key is renamed where it stands
(the row's own and its ``bounds`` record's), byte for byte otherwise; in configs the report's
extra column and its label follow. Run from the repository root: ``python results/migrate_rs_ag_throughput.py``.
Running it again changes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEY = (b'"achievable":', b'"rs_ag_throughput":')
CONFIG = ((", achievable,", ", rs_ag_throughput,"), ("[achievable,", "[rs_ag_throughput,"),
          ("RS*+AG* (achievable)", "RS*+AG* throughput"))


def migrate_rows(data: bytes) -> bytes:
    """``rows.jsonl`` bytes with the key renamed; every other byte kept."""
    return data.replace(*KEY)


def migrate_config(text: str) -> str:
    """A config's text with the extra column and its label renamed."""
    for old, new in CONFIG:
        text = text.replace(old, new)
    return text


def main() -> int:
    changed = []
    for path in sorted((ROOT / "results").rglob("rows.jsonl")):
        data = path.read_bytes()
        if migrate_rows(data) != data:
            path.write_bytes(migrate_rows(data))
            changed.append(path)
    for path in sorted([*(ROOT / "results").rglob("config.yaml"), *(ROOT / "experiments").glob("*.yaml")]):
        text = path.read_text()
        if migrate_config(text) != text:
            path.write_text(migrate_config(text))
            changed.append(path)
    for path in changed:
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
