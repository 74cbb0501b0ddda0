"""The large-scale TACOS benchmark's report: its fitted growth exponents, overall and on each side of
4,096 NPUs, and a case that ran out of its budget."""

import re

from benchmarks.tacos_large import FAMILIES, LARGE, render


def _entry(rows):
    return {"machine": "test machine", "loop": 0.2, "budget": 3600.0, "remark": "", "rows": rows}


def _row(spec, npus, seconds):
    return {"spec": spec, "npus": npus, "seconds": seconds, "claimed": 0.01, "events": 10, "deliveries": npus * npus,
            "peak_gib": 0.1}


def _fits(text: str, family: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {family} |") and line.count("|") == 5)
    return [cell.strip() for cell in line.strip("|").split("|")[1:]]


def test_the_fits_split_at_4096_npus():
    # quadratic up to LARGE, cubic above it: 2 below, 3 above, in between over all rows
    sizes = [64, 256, 1024, LARGE, 4 * LARGE, 16 * LARGE]
    rows = [_row(f"mesh:{n}", n, 1e-9 * n ** 2 if n <= LARGE else 1e-9 * LARGE ** 2 * (n / LARGE) ** 3)
            for n in sizes]
    text = render({"2D mesh": _entry(rows)})
    overall, below, above = (float(x) for x in _fits(text, "2D mesh"))
    assert below == 2.0 and above == 3.0
    assert 2.0 < overall < 3.0
    assert "Not run yet: " + ", ".join(f for f in FAMILIES if f != "2D mesh") in text


def test_a_case_over_its_budget_is_shown_and_left_out_of_the_fits():
    rows = [_row("mesh:8x8", 64, 1e-3), _row("mesh:16x16", 256, 16e-3),
            {"spec": "mesh:32x32", "npus": 1024, "seconds": None, "reached": 0.25, "peak_gib": 0.2}]
    text = render({"2D mesh": _entry(rows)})
    assert re.search(r"\| mesh:32x32 \| 1,024 \| over 3,600 \(25% of the deliveries made\)", text)
    assert _fits(text, "2D mesh") == ["2.00", "2.00", ""]


def test_the_figure_draws_the_rows_measured(tmp_path):
    # a family with a case over its budget, one with no rows, one not run: the figure still draws
    from benchmarks.tacos_large import plot
    rows = [_row("mesh:8x8", 64, 1e-3), _row("mesh:16x16", 256, 16e-3),
            {"spec": "mesh:32x32", "npus": 1024, "seconds": None, "reached": 0.25, "peak_gib": 0.2}]
    path = tmp_path / "large.png"
    plot({"2D mesh": _entry(rows), "3D torus": _entry([])}, path)
    assert path.stat().st_size > 10_000
