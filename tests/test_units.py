import pytest

from workbench.util.units import UnitError, format_time, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize("text, seconds", [
    ("0.5us", 0.5e-6), ("700ns", 700e-9), ("30s", 30.0), ("2ms", 2e-3), ("1.5min", 90.0), ("1e-6", 1e-6),
    (3, 3.0), ("0.5 us", 0.5e-6), ("5µs", 5e-6),
])
def test_parse_time(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, nbytes", [
    ("1GiB", 2**30), ("64KB", 64e3), ("1MB", 1e6), ("1GB", 1e9), ("4KiB", 4096), ("1048576", 2**20), (100, 100.0),
])
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text, rate", [
    ("50GB/s", 50e9), ("25GiB/s", 25 * 2**30), ("12.5GB/s", 12.5e9), ("100MB/s", 1e8), (1e9, 1e9),
])
def test_parse_bandwidth(text, rate):
    assert parse_bandwidth(text) == rate


@pytest.mark.parametrize("func, text", [
    (parse_time, "fast"), (parse_time, "5parsecs"), (parse_size, "1GiBs"), (parse_size, "-1GB"),
    (parse_bandwidth, "50GB"), (parse_bandwidth, "50XB/s"), (parse_time, ""), (parse_bandwidth, "-5GB/s"),
])
def test_bad_strings_name_the_string(func, text):
    with pytest.raises(UnitError) as info:
        func(text)
    assert repr(text) in str(info.value)


def test_format_time():
    assert format_time(12.3e-6) == "12.3 us"
    assert format_time(4.56e-3) == "4.56 ms"
