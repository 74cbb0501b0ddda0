"""Committed rows carry no retired meta key: the three per-parameter timing keys became one,
``meta.time_by_choice[parameter]``, and no committed row or algorithm file held any of them, so
no committed file needed rewriting when they were merged."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RETIRED = (b"time_by_chunks", b"time_by_pieces", b"time_by_trees")


def test_no_committed_result_names_a_retired_meta_key():
    files = [p for p in (ROOT / "results").rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json")]
    assert len([p for p in files if p.name == "rows.jsonl"]) >= 15
    holders = [str(p.relative_to(ROOT)) for p in files if any(key in p.read_bytes() for key in RETIRED)]
    assert holders == []
