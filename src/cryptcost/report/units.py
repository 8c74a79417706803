"""Number formatting shared by every report format."""

from __future__ import annotations

import math


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
