"""``workbench tune``: buckets that tile the range (inclusive ends, one per 4x), bad ranges refused
in one line, and a bundle whose winners are the fastest simulated candidates that lower, with
runtime files that carry their bucket's ends and interpret."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.model.algorithm import load_algorithm
from workbench.cli import main
from workbench.checking.simulate import simulate
from workbench.run.tune import STEP, Bucket, RangeError, buckets, parse_range


@settings(max_examples=200, deadline=None)
@given(low=st.integers(1, 10**9), factor=st.floats(1.0, 4.0**12))
def test_buckets_tile_the_range_without_gap_or_overlap(low, factor):
    high = int(low * factor)
    found = buckets(low, high)
    assert found[0].low == low and found[-1].high == high
    for before, after in zip(found, found[1:]):
        assert after.low == before.high + 1  # inclusive ends: the next starts one byte above
        assert before.high + 1 == STEP * before.low  # every bucket but the last spans 4x
    for bucket in found:
        assert bucket.low <= bucket.size <= bucket.high and bucket.index == found.index(bucket)
    assert found[-1].high + 1 <= STEP * found[-1].low


def test_a_one_size_range_is_one_bucket():
    assert buckets(4096, 4096) == [Bucket(0, 4096, 4096)]


@pytest.mark.parametrize("text, message", [
    ("64KB", "expected LO..HI"), ("..1MB", "expected LO..HI"), ("1MB..64KB", "LO <= HI"),
    ("0..1MB", "LO <= HI"), ("abc..1MB", "abc"), ("1.5..16", "whole bytes")])
def test_bad_ranges_are_named(text, message):
    with pytest.raises(RangeError, match=message):
        parse_range(text)


def test_parse_range_reads_nccl_tests_sizes():
    assert parse_range("64KB..256MB") == (64_000, 256_000_000)
    assert parse_range("1KiB..1KiB") == (1024, 1024)


@pytest.mark.parametrize("args, message", [
    (["--sizes", "1MB..64KB"], "--sizes"), (["--sizes", "64KB..1MB", "--formulations", "nope"], "--formulations"),
    (["--sizes", "64KB..1MB", "--time-limit", "0s"], "--time-limit")])
def test_the_command_refuses_bad_arguments_in_one_line(tmp_path, capsys, args, message):
    code = main(["tune", "--topology", "ring:4", "--collective", "allgather", *args, "-o", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "b").exists()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tune") / "bundle"
    code = main(["tune", "--topology", "ring:4", "--collective", "allgather", "--sizes", "64KB..2MB",
                 "--formulations", "ring,direct,bfs-trees,tacos", "--time-limit", "30s", "-o", str(out)])
    assert code == 0
    return out


def test_each_winner_is_the_fastest_simulated_candidate(bundle):
    summary = json.loads((bundle / "summary.json").read_text())
    assert [(b["min_bytes"], b["max_bytes"]) for b in summary["buckets"]] == \
        [(b.low, b.high) for b in buckets(64_000, 2_000_000)]
    for row in summary["buckets"]:
        times = {}
        for name in summary["formulations"]:
            path = bundle / "candidates" / f"allgather-{row['bucket']}-{name}.json"
            if path.exists():
                times[name] = simulate(load_algorithm(path)).collective_time
        assert row["winner"] == min(times, key=times.get)  # every schedule on ring:4 lowers
        assert row["collective_time"] == times[row["winner"]]
        assert row["vs_ring"] == pytest.approx(times["ring"] / row["collective_time"])


def test_the_runtime_files_carry_their_bucket_and_interpret(bundle, capsys):
    summary = json.loads((bundle / "summary.json").read_text())
    for row in summary["buckets"]:
        xml_file, plan_file = (bundle / f for f in row["files"])
        algo = ET.parse(xml_file).getroot()
        assert (int(algo.get("minBytes")), int(algo.get("maxBytes"))) == (row["min_bytes"], row["max_bytes"])
        plan = json.loads(plan_file.read_text())
        assert (plan["min_message_size"], plan["max_message_size"]) == (row["min_bytes"], row["max_bytes"])
        for file in (xml_file, plan_file):
            assert main(["interpret", str(file)]) == 0
    assert "| bucket | sizes | winner |" in (bundle / "summary.md").read_text()
