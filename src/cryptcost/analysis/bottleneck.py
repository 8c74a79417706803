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
round trip, when the FUSE baseline is as slow), ``cpu`` (a core saturated:
the stack's own code on one core, or — every CPU busy — the machine's CPU,
as for a kernel stack whose software AES runs in workers on every core),
``software-aes`` (no ceiling reached, and a kernel stack's AES is a software driver: the cause
the host's facts name, which no ceiling proves), ``latency`` (queue depth 1, no ceiling
reached), ``unknown`` (no rule
holds, or the stack is significantly faster than its baseline, which then
sets no device ceiling).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cryptcost.model import Cell
from cryptcost.analysis.profile import Layers
from cryptcost.record import CipherRef, Host, Stored, Wire
from cryptcost.stacks.base import cipher_threads
from cryptcost.units import rate

NEAR = 0.85            # within 15 % of a ceiling: that ceiling binds
SATURATED = 0.9        # the busiest core this busy: saturated
ALL_BUSY = 0.85        # every CPU together this busy: the machine's CPU binds
LARGE = 1 << 20


@dataclass(frozen=True)
class Verdict:
    bottleneck: str
    sentence: str
    ceilings: dict
    profile: Layers | None = None            # the cell's profile by layer, where it has one

    def to_dict(self) -> dict:
        profile = {"profile": self.profile.to_dict()} if self.profile else {}
        return {"bottleneck": self.bottleneck, "explanation": self.sentence,
                "ceilings": {**self.ceilings, **profile}}


def _value(r: Stored | None) -> float | None:
    return r.bytes_per_s if r else None


def kernel_aes_is_software(host: Host, r: Stored | None = None) -> tuple[bool, str | None]:
    """Whether the kernel's AES (what fscrypt and dm-crypt use) is software,
    and its driver: the one read after the stack was set up (``r``'s
    ``params.kernel_drivers``) where recorded, else the host's at probe time."""
    drivers = {**host.crypto_drivers, **(r.kernel_drivers if r else {})}
    for name in ("xts(aes)", "aes"):
        d = drivers.get(name)
        if d:
            return d.implementation == "software", d.driver or None
    return False, None


def cipher_ceiling(ref: CipherRef | None, ciphers: list[Stored], host: Host, iodepth: int,
                   r: Stored | None = None) -> tuple[float | None, str]:
    """(bytes/s, how it was obtained) for a stack's declared cipher (:func:`one_ceiling`), and
    where it declares a MAC run after it over the same bytes (``then``), the two in series: a
    byte costs the cipher's time and the MAC's, so the ceiling is 1 / (1/cipher + 1/MAC).
    Without the MAC's cell, the cipher's alone, said so (an upper bound)."""
    cipher, how = one_ceiling(ref, ciphers, host, iodepth, r)
    nearest = "" if ref is None or ref.exact else " (nearest measured algorithm)"
    if cipher is None or ref is None or not ref.then:
        return cipher, how + (nearest if cipher is not None else "")
    mac, mac_how = one_ceiling(replace(ref, algorithm=ref.then, then=None), ciphers, host,
                               iodepth, r)
    if mac is None:
        return cipher, f"{how}; without its MAC ({mac_how}): an upper bound{nearest}"
    return 1 / (1 / cipher + 1 / mac), f"{how}, then {mac_how}, in series{nearest}"


def one_ceiling(ref: CipherRef | None, ciphers: list[Stored], host: Host, iodepth: int,
                r: Stored | None = None) -> tuple[float | None, str]:
    """(bytes/s, how it was obtained) for one algorithm of a stack: the
    cipher table's cell at the stack's unit and with as many threads as the
    stack runs its cipher with (:func:`cipher_threads`: its requests in
    flight, the threads it splits one request into, at most its CPUs).
    Where the engine measured one thread only (Go's, the kernel's), that
    speed × OpenSSL's own measured gain from 1 to N threads of the same
    cipher; a linear × N, said as assumed, only where neither was measured."""
    if not ref:
        return None, "the stack names no cipher the engines measure"
    cell = r.cell if r else Cell()
    cores = cell.cpus or host.cpu.usable
    parallel = cipher_threads(ref.threads, cell.op, cell.block_bytes, iodepth, cores)
    want_engines = {"kernel": ["kernel", "openssl"],
                    "go": ["go", "openssl"]}.get(ref.where, ["openssl"])
    accel = cell.accel is not False           # an acceleration-off copy meets the cipher without it
    why = []
    if ref.where == "kernel" and not any(c.cell.engine == "kernel" for c in ciphers):
        soft, driver = kernel_aes_is_software(host)
        if soft and ref.algorithm.startswith("aes"):
            accel = False
            why.append(f"the kernel's AES is {driver}, a software driver, so OpenSSL without "
                       "AES-NI stands in (an upper bound)")
    pool = [c for c in ciphers if c.cell.algorithm == ref.algorithm and c.cell.accel == accel
            and c.cell.threads in (1, parallel) and c.bytes_per_s]
    for engine in want_engines:
        mine = [c.cell for c in pool if c.cell.engine == engine]
        if mine:
            best = min(mine, key=lambda c: (abs(c.buffer_bytes - ref.unit), c.threads != parallel))
            times, scaled = 1.0, ""
            if best.threads != parallel:
                times, scaled = thread_gain(pool, best.buffer_bytes, parallel)
            how = (f"{engine} {ref.algorithm}{'' if accel else ' without acceleration'} at "
                   f"{best.buffer_bytes} B, {best.threads} thread(s)" + scaled)
            if why:
                how += "; " + why[0]
            return next(c.bytes_per_s for c in pool if c.cell == best) * times, how
    return None, f"{ref.algorithm} was not in this run's cipher table"


def thread_gain(pool: list[Stored], unit: int, parallel: int) -> tuple[float, str]:
    """(factor, how said) from one thread to ``parallel``: OpenSSL's measured
    ratio for the same cipher near ``unit``, else ``parallel`` assumed."""
    by = {}
    for c in pool:
        if c.cell.engine == "openssl":
            by.setdefault(c.cell.buffer_bytes, {})[c.cell.threads] = c.bytes_per_s
    pairs = [(abs(b - unit), b, t) for b, t in by.items() if 1 in t and parallel in t]
    if pairs:
        _, b, t = min(pairs)
        gain = t[parallel] / t[1]
        return gain, (f" × {gain:.2f} (OpenSSL's measured gain from 1 to {parallel} "
                      f"threads at {b} B)")
    return float(parallel), f" × {parallel} (assumed linear: no {parallel}-thread cell measured)"


def classify(r: Stored, baseline: Stored | None, large: Stored | None, fuse_base: Stored | None,
             ciphers: list[Stored], host: Host) -> Verdict:
    """The bottleneck of storage result ``r``: the first rule that holds, in
    the order of the module docstring. The verdict names the ceilings, the
    ratio of the result to each, and the rule that decided.

    ``baseline``: its matched baseline's result for the same cell;
    ``large``: the same stack's 1 MiB result for the same op (small-block slope);
    ``fuse_base``: for FUSE stacks, the FUSE baseline's result.
    """
    value = _value(r)
    cell = r.cell
    label = f"{cell.stack} {cell.op} {_size(cell.block_bytes)}"
    ref = r.cipher_ref
    cipher, cipher_how = cipher_ceiling(ref, ciphers, host, cell.iodepth or 1, r)
    device = _value(baseline)
    ceilings = {"device": device, "cipher": cipher, "cipher_how": cipher_how}
    if value is None:
        return Verdict("unknown", f"{label}: not a throughput result", ceilings)
    ceilings["ratio"] = {k: value / c for k, c in (("device", device), ("cipher", cipher)) if c}
    shown_cipher = f"{rate(cipher)} ({cipher_how})" if cipher else f"not measured: {cipher_how}"
    soft, driver = kernel_aes_is_software(host, r)
    software = bool(ref and ref.where == "kernel" and soft and ref.algorithm.startswith("aes"))
    aside = f"; the kernel uses the software {driver} driver, not AES-NI" if software else ""

    def verdict(kind: str, rule: str, sentence: str) -> Verdict:
        return Verdict(kind, sentence + aside, {**ceilings, "rule": rule})
    busy = r.cpu.max_core_busy
    # a twin: no crypto, only what it adds to its reference
    if r.facts.is_baseline:
        own = r.facts.isolates or "what it adds to its baseline"
        shown_cipher = "none: it encrypts nothing"
    else:
        own = "the crypto"
    if not r.baseline:
        return verdict("device", "a plaintext baseline",
                       f"{label} {rate(value)}: this is the plaintext "
                       "baseline, the device ceiling the encrypted stacks are measured against")
    if device and value >= NEAR * device:
        share = f"{value / device:.0%} of its baseline {r.baseline} ({rate(device)})"
        if r.overhead_significant and (r.overhead or 0) < 0:
            return verdict("unknown", "significantly faster than its baseline",
                           f"{label} {rate(value)} is {share}: significantly faster than its "
                           f"baseline ({-100 * r.overhead:.1f} %), which is no neutral reference "
                           "for this operation, so it sets no device ceiling; read the overhead "
                           "against the reference")
        if r.overhead_significant:
            tail = (f"the device path binds, and {own} still costs a significant "
                    f"{100 * (r.overhead or 0):.1f} %")
        elif r.overhead_significant is None:
            tail = (f"one sample a side, so untested against its baseline: the device path "
                    f"seems to bind, not {own}")
        else:
            tail = f"no significant difference from its baseline: the device path binds, not {own}"
        return verdict("device", f"throughput ≥ {NEAR:.0%} of the device ceiling",
                       f"{label} {rate(value)} is {share}: {tail}")
    if cipher and value >= NEAR * cipher:
        return verdict("cipher", f"throughput ≥ {NEAR:.0%} of the cipher ceiling",
                       f"{label} {rate(value)} is {value / cipher:.0%} of the cipher ceiling "
                       f"{shown_cipher}: cipher-bound")
    if cell.block_bytes and cell.block_bytes < LARGE and _value(large) and \
            value < 0.5 * _value(large) and r.iops:
        per_req = (1 / r.iops - cell.block_bytes / _value(large)) * 1e6
        ceilings["per_request_us"] = per_req
        return verdict("per-request", "small blocks < 50 % of the 1 MiB throughput",
                       f"{label} {rate(value)} vs {rate(_value(large))} at 1 MiB: about "
                       f"{per_req:.0f} µs per request beyond the bytes; per-request overhead "
                       "(system calls, FUSE round trips, journalling) dominates")
    if _value(fuse_base) and value >= NEAR * _value(fuse_base):
        return verdict("fuse", f"throughput ≥ {NEAR:.0%} of the FUSE passthrough's",
                       f"{label} {rate(value)} is {value / _value(fuse_base):.0%} of the FUSE "
                       f"passthrough ({rate(_value(fuse_base))}): the FUSE round trip limits it, "
                       "not the cipher")
    machine = r.cpu.machine_busy
    cores = cell.cpus or host.cpu.usable
    if busy >= SATURATED and cores > 1 and machine >= ALL_BUSY:
        return verdict("cpu",
                       f"the busiest core ≥ {SATURATED:.0%} and all {cores} CPUs ≥ {ALL_BUSY:.0%} "
                       "busy below every ceiling",
                       f"{label} {rate(value)}: all {cores} CPUs were {machine:.0%} busy (the "
                       f"busiest {busy:.0%}) while the device ({rate(device)}) and the cipher "
                       f"({shown_cipher}) allow more: this machine's CPU is the limit, spread "
                       "over every core")
    if busy >= SATURATED:
        return verdict("cpu", f"the busiest core ≥ {SATURATED:.0%} busy below every ceiling",
                       f"{label} {rate(value)}: one core was {busy * 100:.0f} % busy while the "
                       f"device ({rate(device)}) and the cipher ({shown_cipher}) allow more: the "
                       "stack's own code on one core is the limit (no parallelism)")
    below = (f"below the device ({rate(device)}, {value / device:.0%}) and cipher ({shown_cipher}) "
             "ceilings with no core saturated") if device else "with no core saturated"
    if software:        # no ceiling reached, but the host's facts name a likely cause
        return Verdict("software-aes", f"{label} {rate(value)}: {below}; the kernel's AES here "
                       f"is {driver}, a software driver, which runs in each request's path: the "
                       "likely limit, which the host names and no ceiling proves (its profile "
                       "would)", {**ceilings, "rule": "below every ceiling, and the kernel's AES "
                                                      "is a software driver"})
    if (cell.iodepth or 1) <= 1:
        return verdict("latency", "below every ceiling at queue depth 1",
                       f"{label} {rate(value)}: {below}: each request waits for the previous one "
                       "(queue depth 1), so the stack's latency per request sets the speed")
    return verdict("unknown", "no rule holds", f"{label} {rate(value)}: {below}")


def _size(n: int) -> str:
    from cryptcost.units import size
    return size(n) if n else ""


def classify_network(r: Stored, baseline: Stored | None, ciphers: list[Stored],
                     host: Host) -> Verdict:
    """The bottleneck of network result ``r``, first rule that holds:

    * ``link`` — within 15 % of plain TCP on the same link (the link ceiling);
    * ``cipher`` — within 15 % of the cipher ceiling: the negotiated AEAD's
      raw speed at the stack's record size, × its parallel streams;
    * ``daemon`` — one of the stack's processes (ssh, stunnel,
      wireguard-go, charon) used ≥ 85 % of one core: a single-threaded
      daemon is the limit;
    * ``per-packet`` — the tunnel sends MTU-sized packets where plain TCP
      sends GSO frames of many times that, so it pays per-packet costs
      (encapsulation, TUN reads, system calls) the baseline does not;
    * ``cpu`` — the busiest core ≥ 90 %; else ``unknown``.
    """
    value = _value(r)
    cell = r.cell
    label = f"{cell.stack} {cell.workload}" + (f" ×{cell.streams}" if (cell.streams or 1) > 1
                                               else "")
    ref = r.cipher_ref
    cipher, cipher_how = cipher_ceiling(ref, ciphers, host, cell.streams or 1, r)
    link = _value(baseline)
    ceilings = {"link": link, "cipher": cipher, "cipher_how": cipher_how}
    if value is None:
        return Verdict("unknown", f"{label}: not a throughput result", ceilings)
    ceilings["ratio"] = {k: value / c for k, c in (("link", link), ("cipher", cipher)) if c}
    shown_cipher = f"{rate(cipher)} ({cipher_how})" if cipher else f"not measured: {cipher_how}"
    daemon = r.busiest_daemon_core or 0
    wire, base_wire = r.wire or Wire(), (baseline.wire if baseline else None) or Wire()
    mtu = cell.mtu or 1500

    def verdict(kind: str, rule: str, sentence: str) -> Verdict:
        return Verdict(kind, sentence, {**ceilings, "rule": rule})
    if not r.baseline:
        return verdict("link", "a plaintext baseline",
                       f"{label} {rate(value)}: the plaintext baseline on this "
                       "link, the ceiling the encrypted stacks are measured against")
    if link and value >= NEAR * link:
        return verdict("link", f"throughput ≥ {NEAR:.0%} of the link ceiling",
                       f"{label} {rate(value)} is {value / link:.0%} of plain {r.baseline} "
                       f"({rate(link)}): the link binds, not the crypto")
    if cipher and value >= NEAR * cipher:
        return verdict("cipher", f"throughput ≥ {NEAR:.0%} of the cipher ceiling",
                       f"{label} {rate(value)} is {value / cipher:.0%} of the cipher ceiling "
                       f"{shown_cipher}: cipher-bound")
    ratio = (f"{value / link:.0%} of plain {r.baseline} ({rate(link)})" if link
             else "no link ceiling measured")
    if daemon >= NEAR:
        return verdict("daemon", f"a stack process ≥ {NEAR:.0%} of one core",
                       f"{label} {rate(value)}, {ratio}: its busiest process used {daemon:.0%} of "
                       f"one core while the cipher allows {shown_cipher}: a single-threaded daemon "
                       "is the limit")
    size, base_size = wire.median_packet_bytes, base_wire.median_packet_bytes
    if size and base_size and size <= mtu + 100 and base_size >= 4 * size:
        return verdict("per-packet", "MTU-sized packets where the baseline sends GSO frames",
                       f"{label} {rate(value)}, {ratio}: it sends {size:.0f}-byte packets where "
                       f"plain TCP sends {base_size:.0f}-byte GSO frames, so it pays per-packet "
                       "costs (encapsulation, TUN reads, system calls) far more often than the "
                       "cipher's ceiling suggests")
    busy = r.cpu.max_core_busy
    if busy >= 0.9:
        return verdict("cpu", "the busiest core ≥ 90 % busy below every ceiling",
                       f"{label} {rate(value)}, {ratio}: a core was {busy:.0%} busy; "
                       + ("both ends share this host's CPUs" if r.shared_cpus
                          else "the busiest core of either host"))
    return verdict("unknown", "no rule holds",
                   f"{label} {rate(value)}, {ratio}, cipher ceiling {shown_cipher}")
