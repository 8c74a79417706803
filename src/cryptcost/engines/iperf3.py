"""The iperf3 engine: one client invocation per sample, JSON output.

The client runs at end ``a`` of a link and connects to the endpoint a
network stack returns; the server (``iperf3 -s``) listens at end ``b``.
iperf3 fills its buffers with random bytes by default, so what crosses a
tunnel is incompressible (rule 3). ``repeating`` switches to iperf3's
repeating pattern: the wire check's plaintext canary uses it, and the
``compressible`` workload, which asks what compression wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cryptcost.errors import ProcessError

PORT = 5201


@dataclass(frozen=True)
class IperfOutcome:
    """What one client run measured, from the receiver's side."""

    bytes: int                     # bytes the receiver got
    seconds: float                 # the receiver's measured time
    retransmits: int | None        # TCP retransmits of the sender
    client_cpu: float              # CPU-seconds of the iperf3 client (user + system), at end a
    server_cpu: float              # CPU-seconds of the iperf3 server, at end b
    version: str | None = None

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


def server_argv(bind: str, port: int = PORT) -> list[str]:
    """A server that serves one client after another until stopped."""
    return ["iperf3", "-s", "-B", bind, "-p", str(port)]


def client_argv(host: str, port: int, seconds: float | None, *, streams: int = 1,
                reverse: bool = False, repeating: bool = False,
                nbytes: int | None = None) -> list[str]:
    """A client that sends for ``seconds`` (whole seconds: iperf3 reads ``-t`` as an integer,
    and 0 as for ever), or until it has sent ``nbytes``."""
    if nbytes is None and (seconds is None or seconds < 1 or seconds != int(seconds)):
        raise ValueError(f"iperf3 runs for whole seconds, not {seconds!r}")
    amount = ["-n", str(nbytes)] if nbytes is not None else ["-t", str(int(seconds))]
    argv = ["iperf3", "-J", "-c", host, "-p", str(port), *amount, "-P", str(streams)]
    if reverse:
        argv.append("-R")
    if repeating:
        argv.append("--repeating-payload")
    return argv


def parse(text: str, reverse: bool = False) -> IperfOutcome:
    """Parse ``iperf3 -J`` (the client's output; ``reverse``: it received)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ProcessError(["iperf3"], None, text, "", why="printed no JSON") from None
    if data.get("error"):
        raise ProcessError(["iperf3"], None, "", str(data["error"]), why=str(data["error"]))
    end = data.get("end") or {}
    received, sent = end.get("sum_received") or {}, end.get("sum_sent") or {}
    if not received.get("bytes") or not received.get("seconds"):
        raise ProcessError(["iperf3"], None, text[-300:], "", why="reported no bytes received")
    cpu = end.get("cpu_utilization_percent") or {}
    seconds = float(received["seconds"])
    # iperf3's CPU figures are percentages of its own wall time; its test lasted the sender's
    # seconds.
    wall = float(sent.get("seconds") or seconds)
    version = (data.get("start") or {}).get("version")
    return IperfOutcome(bytes=int(received["bytes"]), seconds=seconds,
                        retransmits=sent.get("retransmits"),
                        client_cpu=cpu.get("host_total", 0.0) / 100 * wall,
                        server_cpu=cpu.get("remote_total", 0.0) / 100 * wall,
                        version=version.split()[-1] if version else None)
