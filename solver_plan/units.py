"""Human units for sizes, bandwidths, rates and durations ("80GB", "100Gb/s", "312TFLOPS", "5us").

Decimal prefixes are powers of 1000, binary prefixes (Ki, Mi, Gi, Ti) powers of 1024. A lower-case
"b" means bits (divided by 8), upper-case "B" bytes. Plain numbers are taken in the base unit.
"""
from __future__ import annotations

import math
import re

from solver_plan.errors import InputError

# Binary sizes in bytes, defined once: every module that counts KiB, MiB or GiB imports these.
KIB = 2**10
MIB = 2**20
GIB = 2**30

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": float(KIB), "Mi": float(MIB), "Gi": float(GIB), "Ti": 2.0**40, "Pi": 2.0**50}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_PREFIX = r"(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P|E)?"
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _prefix_factor(prefix: str | None) -> float:
    prefix = prefix or ""
    return _BINARY[prefix] if prefix in _BINARY else _DECIMAL[prefix]


def _plain_number(value: object, where: str, expected: str) -> float | None:
    if isinstance(value, bool):
        raise InputError(f"expected {expected}, got {value!r}", where)
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise InputError(f"expected {expected}, got {value!r}", where)
    if not value.isascii():  # float() reads '１６' (full-width) and other scripts' digits
        raise InputError(f"cannot read {value!r}; expected {expected} in ASCII digits", where)
    try:
        return float(value.strip())
    except ValueError:
        return None


def _positive(number: float, value: object, where: str, expected: str) -> float:
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"must be positive, got {value!r} (expected {expected})", where)
    return number


def _parse(value: object, where: str, expected: str, suffix_pattern: str, to_base) -> float:
    number = _plain_number(value, where, expected)
    if number is not None:
        return _positive(number, value, where, expected)
    text = str(value).strip().replace(" ", "")
    if text.startswith("-"):  # '-16GB': a sign the pattern below would only call unreadable
        raise InputError(f"must be positive, got {value!r} (expected {expected})", where)
    match = re.fullmatch(_NUMBER + _PREFIX + suffix_pattern, text)
    if not match:
        raise InputError(f"cannot read {value!r}; expected {expected}", where)
    number = float(match.group(1)) * _prefix_factor(match.group(2))
    return _positive(to_base(number, match.groups()[2:]), value, where, expected)


def parse_bytes(value: object, where: str = "value") -> float:
    """'80GB' -> 8e10, '16GiB' -> 17179869184, '512Mb' -> 6.4e7 (bits / 8)."""
    return _parse(value, where, "a size such as 16GB, 16GiB or 17179869184", r"(B|b)",
                  lambda n, g: n / 8 if g[0] == "b" else n)


def parse_bandwidth(value: object, where: str = "value") -> float:
    """Bytes per second: '300GB/s' -> 3e11, '100Gb/s' -> 1.25e10, '100Gbps' -> 1.25e10."""
    return _parse(value, where, "a bandwidth such as 300GB/s or 100Gb/s", r"(B/s|b/s|Bps|bps)",
                  lambda n, g: n / 8 if g[0] in ("b/s", "bps") else n)


def parse_flops(value: object, where: str = "value") -> float:
    """FLOP per second: '312TFLOPS' -> 3.12e14 (also 'TFLOP/s')."""
    return _parse(value, where, "a compute rate such as 312TFLOPS", r"(FLOPS|FLOP/s|flops|flop/s)",
                  lambda n, g: n)


def parse_seconds(value: object, where: str = "value") -> float:
    """Seconds: '5us' -> 5e-6, '2ms' -> 2e-3, 0.1 -> 0.1. Zero is allowed for durations."""
    if value == 0 or value == "0":
        return 0.0
    number = _plain_number(value, where, "a duration such as 5us or 0.002")
    if number is not None:
        return _positive(number, value, where, "a duration such as 5us or 0.002")
    text = str(value).strip().replace(" ", "")
    match = re.fullmatch(_NUMBER + r"(s|ms|us|µs|ns)", text)
    if not match:
        raise InputError(f"cannot read {value!r}; expected a duration such as 5us or 0.002", where)
    return float(match.group(1)) * _TIME_UNITS[match.group(2)]


def format_bytes(num: float) -> str:
    """Bytes in decimal units for people, e.g. "16.00 GB" (two decimals; plain bytes below 1 KB)."""
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(num) >= factor:
            return f"{num / factor:.2f} {unit}"
    return f"{num:.0f} B"


def format_seconds(sec: float) -> str:
    """Seconds for people in the largest fitting unit: s, ms, us or ns."""
    if sec >= 1:
        return f"{sec:.3f} s"
    if sec >= 1e-3:
        return f"{sec * 1e3:.3f} ms"
    if sec >= 1e-6 or sec == 0:
        return f"{sec * 1e6:.1f} us"
    return f"{sec * 1e9:.1f} ns"
