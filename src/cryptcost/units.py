"""Units: formatting shared by every report format, and parsing sizes,
rates and link speeds. A leaf module: it imports nothing of cryptcost's but
the errors."""

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
        raise UserError(f"bad {what} {text!r}: use a number with an optional unit, e.g. "
                        "4096, 4K, 1M")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise UserError(f"bad {what} {text!r}: must be positive")
    return value


def duration(seconds: float) -> str:
    """``45 s``, ``2.5 min``: seconds below two minutes, minutes above."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


_SECONDS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(text: str, what: str = "duration") -> float:
    """``90``, ``90s``, ``10m``, ``1.5h`` → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SECONDS or float(match.group(1)) <= 0:
        raise UserError(f"bad {what} {text!r}: use a positive number of seconds, or e.g. "
                        "90s, 10m, 1.5h")
    return float(match.group(1)) * _SECONDS[unit]


def parse_until(text: str, now: float | None = None) -> float:
    """``run --until``'s time, as seconds since the epoch: ``HH:MM`` (this host's local time,
    today, or tomorrow when that has passed) or a duration from ``now`` (``90m``, ``2h``)."""
    import time as _time
    now = _time.time() if now is None else now
    m = re.fullmatch(r"\s*([01]?\d|2[0-3]):([0-5]\d)\s*", text)
    if not m:
        try:
            return now + parse_duration(text, "--until")
        except UserError:
            raise UserError(f"bad --until {text!r}: use a time of day, e.g. 05:30, or a "
                            "duration from now, e.g. 90m or 2h") from None
    t = _time.localtime(now)
    at = _time.mktime((t.tm_year, t.tm_mon, t.tm_mday, int(m.group(1)), int(m.group(2)), 0,
                       0, 0, -1))
    return at if at > now else _time.mktime((t.tm_year, t.tm_mon, t.tm_mday + 1,
                                             int(m.group(1)), int(m.group(2)), 0, 0, 0, -1))


LINKS = {"1gbe": 117e6, "2.5gbe": 294e6, "10gbe": 1170e6, "25gbe": 2925e6, "100gbe": 11700e6}
_RATE_UNITS = {"b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "kib/s": 1024, "mib/s": 1 << 20,
          "gib/s": 1 << 30}


def parse_device_speed(text: str) -> float:
    """``3GB/s``, ``500MB/s``, ``1.5GiB/s`` → bytes/s."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmg]i?b/s|b/s)\s*", text.lower())
    if not m:
        raise UserError(f"bad --device-speed {text!r}: use e.g. 3GB/s, 500MB/s or 1.5GiB/s")
    value = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if value <= 0:
        raise UserError(f"bad --device-speed {text!r}: must be positive")
    return value


def parse_link(text: str) -> float:
    """``1GbE``, ``10GbE``, ``2.5Gbit`` → usable bytes/s (1GbE ≈ 117 MB/s of payload)."""
    low = text.lower().strip()
    if low in LINKS:
        return LINKS[low]
    m = re.fullmatch(r"([\d.]+)\s*(g|m)bit", low)
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"bad --link {text!r}: use 1GbE, 10GbE, 25GbE or a rate such as 2.5Gbit")
    bits = float(m.group(1)) * (1e9 if m.group(2) == "g" else 1e6)
    return bits / 8 * 0.936          # Ethernet + IP + TCP framing at MTU 1500


def target_of(model: dict) -> tuple[float | None, str | None]:
    """The cost-model target from ``{device_speed|link}``: (bytes/s, label)."""
    if model.get("device_speed"):
        return parse_device_speed(model["device_speed"]), f"a {model['device_speed']} device"
    if model.get("link"):
        return parse_link(model["link"]), f"a {model['link']} link"
    return None, None
