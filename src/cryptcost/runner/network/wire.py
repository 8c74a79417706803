"""The wire check: a few hundred packets captured on the link during a
measurement, and what they show.

Every network sample captures up to :data:`~cryptcost.engines.tcpdump.COUNT`
packets leaving each end's interface: what one end sends is what is on the
wire. (Not what arrives: a kernel that decrypts ESP in tunnel mode hands
the decrypted packet to the interface's taps a second time, as incoming
traffic, and that copy never crossed the wire.) For an encryption stack they must show
no plaintext — no packet the stack's :meth:`leak` rule flags (by default:
a packet carrying data to or from the service's own port) — and their payload must
have a ciphertext's entropy. Before its first sample each stack also
carries a *canary*: iperf3's repeating digit pattern (or a file of it),
which must not appear on the wire. A tunnel that quietly falls back to
plaintext fails its measurement instead of reporting a fast result. The
baselines are captured the same way; their plaintext is the check's own
positive control. The packet sizes give the size on the wire: plain TCP
sends 64 KB GSO frames, most tunnels MTU-sized packets.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from pathlib import Path

from cryptcost import proc
from cryptcost.engines import tcpdump
from cryptcost.engines.tcpdump import Packet
from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link

CANARY = b"0123456789" * 2           # iperf3 --repeating-payload's pattern, twice in a row
# bits per byte; random data gives ~7.99, text ~4–5, the canary 3.3
MIN_ENTROPY = 7.0
MIN_PAYLOAD = 128                    # bytes: packets with less (ACKs, handshakes) say little


class PlaintextOnWire(CryptcostError):
    """An encryption stack's traffic showed plaintext."""


def entropy(data: bytes) -> float:
    """Shannon entropy in bits per byte."""
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


def judge(packets: list[Packet], leak, service: int, *, canary: bool = False, sealed=None) -> dict:
    """What ``packets`` show. ``leak(packet, service)`` is the stack's rule;
    ``sealed(packet)`` the part of a payload that must be ciphertext (the
    stack's plaintext framing cut off), whose entropy is judged."""
    flagged = [(p, why) for p in packets for why in [leak(p, service)] if why]
    leaks = [why for _, why in flagged]
    sealed = sealed or (lambda p: p.payload)
    data = [body for p in packets if len(p.payload) >= MIN_PAYLOAD for body in [sealed(p)] if body]
    blob = b"".join(data)
    bits = entropy(blob) if blob else None
    pattern = sum(1 for p in packets if CANARY in p.payload)
    protos = Counter({6: "tcp", 17: "udp", 50: "esp"}.get(p.proto, "other") for p in packets)
    sizes = [p.length for p in packets if len(p.payload) >= MIN_PAYLOAD]     # data, not ACKs
    reasons = []
    if leaks:
        shown = "; ".join(f"{p.sport}→{p.dport}, {len(p.payload)} B of payload"
                          for p, _ in flagged[:3])
        reasons.append(f"{len(leaks)} of {len(packets)} packets in plaintext: {leaks[0]} ({shown})")
    if canary and pattern:
        reasons.append(f"{pattern} packets carry the canary pattern in plaintext")
    if bits is not None and bits < MIN_ENTROPY and not canary:
        reasons.append(f"the payload's entropy is {bits:.2f} bits/byte, below a ciphertext's "
                       f"{MIN_ENTROPY:g}")
    if not packets:
        reasons.append("no packet was captured")
    return {"packets": len(packets), "payload_bytes": len(blob),
            # of data packets
            "median_packet_bytes": int(statistics.median(sizes)) if sizes else None,
            "max_packet_bytes": max(sizes) if sizes else None, "protocols": dict(protos),
            "entropy_bits_per_byte": round(bits, 3) if bits is not None else None,
            "plaintext_packets": len(leaks), "canary_packets": pattern,
            "verdict": "plaintext" if reasons else "encrypted", "reasons": reasons}


class Capture:
    """tcpdump of the packets each end sends, one capture per end, each at
    its own end (a peer's through its worker), for the duration of a
    ``with`` block (a link whose ends share one interface, loopback, is not
    wire-checked)."""

    def __init__(self, res: Resources, link: Link, workdir: Path):
        self.res, self.link = res, link
        self.ends = {}
        for end in ("a", "b"):
            at = link.at(end)
            where = _capture_dir(link, end, workdir)
            self.ends[end] = (at, where / f"wire-{end}.pcap", where / f"tcpdump-{end}.log")
        self.daemons = []

    def __enter__(self) -> "Capture":
        # both ends' captures start before either is waited for: each takes about 50 ms to listen
        for end, (at, path, log) in self.ends.items():
            at.write(path, b"")
            at.write(log, b"")
            argv = tcpdump.argv(self.link.iface(end), path, direction="out")
            self.daemons.append((at, at.daemon(argv, logfile=str(log)), log))
        for at, daemon, log in self.daemons:
            proc.wait_for(lambda at=at, log=log: b"listening on" in at.read(log), timeout=15,
                          daemon=daemon, what="tcpdump listening")
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(0.05)                # the last packets reach tcpdump's socket
        for at, daemon, _ in reversed(self.daemons):
            at.stop(daemon, timeout=5)

    def packets(self) -> list[Packet]:
        out = []
        for at, path, _ in self.ends.values():
            data = at.read(path)
            if data:
                out += tcpdump.parse_pcap(data)
        return out


def _capture_dir(link: Link, end: str, workdir: Path) -> Path:
    """Where an end's captures go: the run's work directory on this host, a
    directory of the link's own at a peer's end (made once)."""
    if link.at(end).machine == "local":
        return workdir
    dirs = link.__dict__.setdefault("capture_dirs", {})
    if end not in dirs:
        dirs[end] = link.at(end).tmpdir("cryptcost-wire-")
    return dirs[end]
