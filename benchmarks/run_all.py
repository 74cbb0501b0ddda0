"""`make bench`: run every benchmark and write its table under results/bench/."""

from __future__ import annotations

import sys

from benchmarks import (bounds_speed, cluster_scale, hostile_probe, libra_solve, multipath_scaling, startup,
                        syccl_wall, taccl_scaling, tacos_scaling, verify_simulate)


def main() -> int:
    startup.main([])
    verify_simulate.main([])
    tacos_scaling.main([])
    libra_solve.main([])
    taccl_scaling.main([])
    bounds_speed.main([])
    multipath_scaling.main([])
    cluster_scale.main([])
    syccl_wall.main([])
    hostile_probe.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
