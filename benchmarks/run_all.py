"""`make bench`: run every benchmark and write its table under results/bench/."""

from __future__ import annotations

import sys

from benchmarks import verify_simulate


def main() -> int:
    verify_simulate.main(sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
