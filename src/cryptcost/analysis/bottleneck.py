"""What limits a storage result (METHODOLOGY rule 8), in one sentence.

Three ceilings are compared with the measured throughput:

* the **device ceiling** — the matched baseline on the same medium;
* the **cipher ceiling** — the raw speed of the stack's cipher from the
  same run's cipher table, at the stack's crypto unit, × the parallelism
  the workload gives it (1 for queue depth 1). For kernel stacks whose
  kernel driver is a software AES, the ceiling is OpenSSL's speed with
  acceleration off (itself an upper bound for a constant-time kernel AES);
* the **per-request overhead** — how much slower small blocks are than
  1 MiB blocks on the same stack (the small-block slope).

Verdicts: ``device``, ``cipher``, ``per-request``, ``fuse`` (the FUSE
round trip, when the FUSE baseline is as slow), ``cpu`` (the stack's own
code, a core saturated), ``latency`` (queue depth 1, no ceiling reached),
``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptcost.units import rate

NEAR = 0.85            # within 15 % of a ceiling: that ceiling binds
LARGE = 1 << 20


@dataclass(frozen=True)
class Verdict:
    bottleneck: str
    sentence: str
    ceilings: dict

    def to_dict(self) -> dict:
        return {"bottleneck": self.bottleneck, "explanation": self.sentence, "ceilings": self.ceilings}


def _value(r: dict) -> float | None:
    return r.get("median_bytes_per_s")


def kernel_aes_is_software(host: dict) -> tuple[bool, str | None]:
    """Whether the kernel's AES (what fscrypt and dm-crypt use) is software, and its driver."""
    drivers = host.get("crypto_drivers", {})
    for name in ("xts(aes)", "aes"):
        d = drivers.get(name)
        if d:
            return d.get("implementation") == "software", d.get("driver")
    return False, None


def cipher_ceiling(ref: dict | None, ciphers: list[dict], host: dict, iodepth: int) -> tuple[float | None, str]:
    """(bytes/s, how it was obtained) for a stack's cipher reference."""
    if not ref:
        return None, "no measured cipher matches this stack's cipher"
    cores = host.get("cpu", {}).get("cores_usable") or host.get("cpu", {}).get("cores") or 1
    parallel = 1 if iodepth <= 1 else min(cores, iodepth)
    want_engines = {"kernel": ["kernel", "openssl"], "go": ["go", "openssl"]}.get(ref["where"], ["openssl"])
    accel = True
    why = []
    if ref["where"] == "kernel" and not any(c["engine"] == "kernel" for c in ciphers):
        soft, driver = kernel_aes_is_software(host)
        if soft and ref["algorithm"].startswith("aes"):
            accel = False
            why.append(f"the kernel's AES is {driver}, a software driver, so OpenSSL without AES-NI "
                       "stands in (an upper bound)")
    pool = [c for c in ciphers if c["algorithm"] == ref["algorithm"] and c["accel"] == accel
            and c["threads"] == 1 and c.get("median_bytes_per_s")]
    for engine in want_engines:
        mine = [c for c in pool if c["engine"] == engine]
        if mine:
            best = min(mine, key=lambda c: abs(c["buffer_bytes"] - ref["unit"]))
            how = (f"{engine} {ref['algorithm']}{'' if accel else ' without acceleration'} at "
                   f"{best['buffer_bytes']} B × {parallel}")
            if not ref.get("exact", True):
                how += " (nearest measured algorithm)"
            if why:
                how += "; " + why[0]
            return best["median_bytes_per_s"] * parallel, how
    return None, f"{ref['algorithm']} was not in this run's cipher table"


def classify(r: dict, baseline: dict | None, large: dict | None, fuse_base: dict | None,
             ciphers: list[dict], host: dict) -> Verdict:
    """The bottleneck of storage result ``r``.

    ``baseline``: its matched baseline's result for the same cell;
    ``large``: the same stack's 1 MiB result for the same op (small-block slope);
    ``fuse_base``: for FUSE stacks, the FUSE baseline's result.
    """
    value = _value(r)
    label = f"{r['stack']} {r['op']} {_size(r['block_bytes'])}"
    ref = (r.get("params") or {}).get("cipher_ref")
    cipher, cipher_how = cipher_ceiling(ref, ciphers, host, r.get("iodepth", 1))
    device = _value(baseline) if baseline else None
    ceilings = {"device": device, "cipher": cipher, "cipher_how": cipher_how}
    if value is None:
        return Verdict("unknown", f"{label}: not a throughput result", ceilings)
    busy = (r.get("cpu") or {}).get("max_core_busy") or 0
    if not r.get("baseline"):
        return Verdict("device", f"{label} {rate(value)}: this is the plaintext baseline, the device "
                       "ceiling the encrypted stacks are measured against", ceilings)
    # 1. as fast as the plaintext twin: the medium and filesystem limit it
    if device and value >= NEAR * device:
        how = (f"is within {100 * (1 - value / device):.0f} % of" if value < device
               else "is as fast as")
        return Verdict("device", f"{label} {rate(value)} {how} its baseline {r.get('baseline')} "
                       f"({rate(device)}): the device path limits it, not the crypto", ceilings)
    # 2. at the cipher's speed: cipher-bound
    if cipher and value >= NEAR * cipher:
        return Verdict("cipher", f"{label} {rate(value)} vs cipher ceiling {rate(cipher)} ({cipher_how}): "
                       "cipher-bound", ceilings)
    soft, driver = kernel_aes_is_software(host)
    if ref and ref["where"] == "kernel" and soft and ref["algorithm"].startswith("aes"):
        return Verdict("cipher", f"{label} {rate(value)} vs {rate(cipher) if cipher else '?'} "
                       f"({cipher_how}): the kernel uses the software {driver} driver, not AES-NI; "
                       "cipher-bound in the kernel", ceilings)
    # 3. small blocks much slower than large ones: per-request cost
    if large and r["block_bytes"] and r["block_bytes"] < LARGE and _value(large) and \
            value < 0.5 * _value(large) and r.get("iops"):
        per_req = (1 / r["iops"] - r["block_bytes"] / _value(large)) * 1e6
        ceilings["per_request_us"] = per_req
        return Verdict("per-request", f"{label} {rate(value)} vs {rate(_value(large))} at 1 MiB: about "
                       f"{per_req:.0f} µs per request beyond the bytes; per-request overhead "
                       "(system calls, FUSE round trips, journalling) dominates", ceilings)
    # 4. FUSE round trip: the passthrough is no faster
    if fuse_base and _value(fuse_base) and value >= NEAR * _value(fuse_base):
        return Verdict("fuse", f"{label} {rate(value)} ≈ FUSE passthrough {rate(_value(fuse_base))}: "
                       "the FUSE round trip limits it, not the cipher", ceilings)
    if busy >= 0.9:
        return Verdict("cpu", f"{label} {rate(value)}: one core was {busy * 100:.0f} % busy while the "
                       f"cipher alone could do {rate(cipher) if cipher else '?'}: the stack's own code "
                       "on one core is the limit (no parallelism)", ceilings)
    if r.get("iodepth", 1) <= 1:
        return Verdict("latency", f"{label} {rate(value)}: below the device ({rate(device)}) and cipher "
                       f"({rate(cipher) if cipher else 'not measured'}) ceilings with no core saturated: "
                       "each request waits for the previous one (queue depth 1), so the stack's "
                       "latency per request sets the speed", ceilings)
    return Verdict("unknown", f"{label} {rate(value)}: below the device ({rate(device)}) and cipher "
                   f"({rate(cipher) if cipher else 'not measured'}) ceilings with no core saturated",
                   ceilings)


def _size(n: int) -> str:
    from cryptcost.units import size
    return size(n) if n else ""
