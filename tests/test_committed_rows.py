"""Committed results carry no retired key.

The three per-parameter timing keys became one, ``meta.time_by_choice[parameter]``; no committed
row or algorithm file held any of them, so none needed rewriting. The All-Reduce figure
``achievable`` became ``rs_ag_throughput``; ``results/migrate_rs_ag_throughput.py`` renamed it in
the committed rows and configs, every other byte kept."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RETIRED = (b"time_by_chunks", b"time_by_pieces", b"time_by_trees", b'"achievable":')


def _migration():
    spec = importlib.util.spec_from_file_location("migrate", ROOT / "results" / "migrate_rs_ag_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_committed_result_names_a_retired_key():
    files = [p for p in (ROOT / "results").rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json")]
    assert len([p for p in files if p.name == "rows.jsonl"]) >= 15
    holders = [str(p.relative_to(ROOT)) for p in files if any(key in p.read_bytes() for key in RETIRED)]
    assert holders == []


def test_the_migration_renames_the_key_and_keeps_every_other_byte():
    migrate = _migration()
    row = b'{"bound": 1e-06, "achievable": 2e-06, "bounds": {"gossip": null, "achievable": 2e-06}}\n'
    assert migrate.migrate_rows(row) == row.replace(b'"achievable":', b'"rs_ag_throughput":')
    for path in (ROOT / "results").rglob("rows.jsonl"):  # already migrated: nothing left to change
        data = path.read_bytes()
        assert migrate.migrate_rows(data) == data
    config = "extra_columns: [bound, achievable, efficiency]\ncolumns: [\"RS*+AG* (achievable)\"]\n"
    assert migrate.migrate_config(config) == ("extra_columns: [bound, rs_ag_throughput, efficiency]\n"
                                              "columns: [\"RS*+AG* throughput\"]\n")
