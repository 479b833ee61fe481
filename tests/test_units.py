import pytest

from solver_plan.errors import InputError
from solver_plan.units import parse_bandwidth, parse_bytes, parse_flops, parse_seconds


@pytest.mark.parametrize("text, expected", [
    ("80GB", 80e9), ("16GiB", 16 * 2**30), ("512MB", 512e6), ("1.5TB", 1.5e12), ("8Gb", 1e9),
    (17179869184, 17179869184.0), ("1e9", 1e9), ("16 GB", 16e9),
])
def test_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [
    ("300GB/s", 300e9), ("100Gb/s", 12.5e9), ("100Gbps", 12.5e9), ("25GiB/s", 25 * 2**30), (1e9, 1e9),
])
def test_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


def test_flops_and_seconds():
    assert parse_flops("312TFLOPS") == pytest.approx(312e12)
    assert parse_flops("19.5TFLOP/s") == pytest.approx(19.5e12)
    assert parse_seconds("5us") == pytest.approx(5e-6)
    assert parse_seconds("2ms") == pytest.approx(2e-3)
    assert parse_seconds(0) == 0.0


@pytest.mark.parametrize("parser, bad", [
    (parse_bytes, "16 parsecs"), (parse_bytes, "-3GB"), (parse_bytes, 0), (parse_bytes, "0GB"),
    (parse_bytes, True), (parse_bytes, [16]), (parse_bandwidth, "300GB"), (parse_flops, "12GB"),
    (parse_seconds, "fast"), (parse_bytes, "nan"),
])
def test_bad_units_name_the_key(parser, bad):
    with pytest.raises(InputError) as info:
        parser(bad, "device.memory")
    assert "device.memory" in str(info.value)
