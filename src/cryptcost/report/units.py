"""Units: formatting shared by every report format, and parsing sizes."""

from __future__ import annotations

import math
import re

from cryptcost.errors import UserError


def rate(bps: float | None) -> str:
    """Bytes per second as MB/s or GB/s (decimal units, as fio and dd print)."""
    if bps is None or (isinstance(bps, float) and math.isnan(bps)):
        return "—"
    if bps >= 1e9:
        return f"{bps / 1e9:.2f} GB/s"
    if bps >= 1e6:
        return f"{bps / 1e6:.1f} MB/s"
    return f"{bps / 1e3:.1f} kB/s"


def size(n: int | None) -> str:
    """Bytes in binary units: 512 B, 4 KiB, 1 MiB."""
    if n is None:
        return "—"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def ci(lo_hi, median: float) -> str:
    """The CI half-width relative to the median: ``±1.2 %``."""
    if not lo_hi or not median:
        return "—"
    lo, hi = lo_hi
    return f"±{(hi - lo) / 2 / median * 100:.1f} %"


def pct(fraction: float | None, signed: bool = True) -> str:
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "—"
    return f"{fraction * 100:+.1f} %" if signed else f"{fraction * 100:.1f} %"


_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1000, "KIB": 1024, "M": 1024 ** 2, "MB": 1000 ** 2,
          "MIB": 1024 ** 2, "G": 1024 ** 3, "GB": 1000 ** 3, "GIB": 1024 ** 3}


def parse_size(text: str, what: str = "size") -> int:
    """``4096``, ``4K``, ``4KiB``, ``1M``, ``512M``, ``2G`` → bytes (K = 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else None
    if not match or unit not in _UNITS:
        raise UserError(f"bad {what} {text!r}: use a number with an optional unit, e.g. 4096, 4K, 1M")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise UserError(f"bad {what} {text!r}: must be positive")
    return value
