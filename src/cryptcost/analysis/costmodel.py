"""The cost model: what a stack would do on a device or link the user names.

On the RAM medium a stack reaches S and its baseline B; the stack adds
``1/S − 1/B`` seconds per byte. On a device (or link) of speed D:

* **pipelined** (crypto overlaps I/O, as with queued or parallel requests):
  ``min(D, S)`` — whichever ceiling is lower binds;
* **serial** (crypto and I/O take turns, as with one request in flight):
  ``1 / (1/D + 1/S − 1/B)``.

The prediction is the range between the two, with the binding ceiling
named. Where a result was measured on a real device or directory, the
prediction is checked against it.
"""

from __future__ import annotations

import re

from cryptcost.errors import UserError
from cryptcost.report.units import rate

LINKS = {"1gbe": 117e6, "2.5gbe": 294e6, "10gbe": 1170e6, "25gbe": 2925e6, "100gbe": 11700e6}
_UNITS = {"b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "kib/s": 1024, "mib/s": 1 << 20,
          "gib/s": 1 << 30}


def parse_device_speed(text: str) -> float:
    """``3GB/s``, ``500MB/s``, ``1.5GiB/s`` → bytes/s."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmg]i?b/s|b/s)\s*", text.lower())
    if not m:
        raise UserError(f"bad --device-speed {text!r}: use e.g. 3GB/s, 500MB/s or 1.5GiB/s")
    value = float(m.group(1)) * _UNITS[m.group(2)]
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


def predict(results: list[dict], target: float, target_label: str,
            verdicts: dict[int, dict] | None = None) -> list[dict]:
    """One prediction per measured (non-baseline) byte-throughput result."""
    by_key = {(r["stack"], r["workload"], r["op"], r["block_bytes"], r["iodepth"]): r for r in results}
    out = []
    for i, r in enumerate(results):
        if r.get("role") == "baseline" or "median_bytes_per_s" not in r or not r.get("baseline"):
            continue
        base = by_key.get((r["baseline"], r["workload"], r["op"], r["block_bytes"], r["iodepth"]))
        s = r["median_bytes_per_s"]
        b = base["median_bytes_per_s"] if base else s
        extra = max(0.0, 1 / s - 1 / b)
        pipelined = min(target, s)
        serial = 1 / (1 / target + extra)
        if target <= s:
            binding = target_label
        else:
            kind = (verdicts or {}).get(i, {}).get("bottleneck", "stack")
            binding = f"the stack ({kind})"
        out.append({"stack": r["stack"], "workload": r["workload"], "op": r["op"],
                    "block_bytes": r["block_bytes"], "iodepth": r["iodepth"], "measured": s,
                    "predicted_low": min(serial, pipelined), "predicted_high": pipelined,
                    "binding": binding,
                    "sentence": f"on {target_label}: {rate(min(serial, pipelined))}–{rate(pipelined)}, "
                                f"{binding} binds"})
    return out
