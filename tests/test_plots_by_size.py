"""The by-size figure: one per topology, only for runs over three sizes or more."""

from workbench.reports.plots import time_by_size


def _row(topology, collective, formulation, size, time, bound, status="feasible"):
    return {"topology": topology, "collective": collective, "formulation": formulation, "size_bytes": size,
            "collective_time": time, "bound": bound, "status": status}


def test_one_figure_per_topology_over_three_sizes(tmp_path):
    rows = [_row(t, c, f, s, s * 1e-10 + 1e-6 * (1 + i), s * 1e-10 + 1e-6)
            for t in ("ring:8", "dgx1") for c in ("allgather", "allreduce")
            for i, f in enumerate(("Ring", "Bruck")) for s in (64e3, 1e6, 16e6)]
    rows.append(_row("ring:8", "allgather", "Broken", 1e6, None, None, status="error"))
    written = time_by_size(rows, tmp_path / "by_size")
    assert sorted(p.name for p in written) == ["dgx1.png", "ring_8.png"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_no_figure_below_three_sizes(tmp_path):
    rows = [_row("ring:8", "allgather", "Ring", s, 1e-5, 1e-6) for s in (64e3, 1e6)]
    assert time_by_size(rows, tmp_path / "by_size") == []
    assert not (tmp_path / "by_size").exists()


def test_efficiency_against_npus_one_figure_per_collective_and_size(tmp_path):
    from workbench.reports.plots import efficiency_by_npus

    rows = []
    for npus, spec in ((32, "rails:4x8"), (512, "rails:64x8"), (512, "rails:64x8,over=2")):
        for collective in ("allgather", "allreduce"):
            for formulation in ("TACOS", "Ring"):
                row = _row(spec, collective, formulation, 2**30, 1e-3, 5e-4)
                row.update(npus=npus, efficiency=0.5, topology_source=spec)
                rows.append(row)
    written = efficiency_by_npus(rows, tmp_path / "by_npus")
    assert sorted(p.name for p in written) == ["allgather_1073741824B.png", "allreduce_1073741824B.png"]
    assert all(p.stat().st_size > 1000 for p in written)
    assert efficiency_by_npus([r for r in rows if r["npus"] == 32], tmp_path / "none") == []  # one size: none
