"""Network stacks: a :class:`~cryptcost.stacks.base.Stack` built between the
two ends of a :class:`~cryptcost.links.Link`.

The runner sets the link up once (:meth:`~cryptcost.links.Link.setup`), so
that every stack and its baseline share it, and starts the service the
traffic goes to at end ``b`` (an iperf3 server on ``service``). Call order,
after the common ones:

``setup(res, link, service)``
    Build the stack so that a client at end ``a`` reaches ``service`` at
    end ``b``; return the :class:`Endpoint` the client connects to. A
    tunnel returns the inner address of ``b``; a TLS or SSH forwarder the
    local port of its client side. Daemons are started with :meth:`start`,
    which remembers the end each runs at (CPU per end, rule 7).
``verify(res)``
    Read back what was negotiated (cipher suite, proposal, which
    implementation ran) from the stack itself; raise
    :class:`~cryptcost.errors.CryptcostError` when it is not what was asked.
``leak(packet, service)``
    The wire check: why a captured packet of the link shows plaintext, or
    None. The default refuses any packet to or from the service's port.
``sealed(packet)``
    The part of a payload whose entropy must be a ciphertext's (default:
    all of it; a protocol that frames ciphertext in plaintext headers cuts
    them off).

Network facts, besides the common ones: ``traffic`` (``stream``: iperf3
through the endpoint; ``files``: the stack's own file transfer, see
:class:`FileShareStack`), ``links`` (the links it can be built on),
``transport`` (what carries it on the wire, e.g. "UDP 51820"),
``links`` lists ``peer`` for a stack that runs its end ``b`` only through
``link.at("b")`` (commands, daemons, files), so that it works on another
machine; ``exclusive`` (it claims fixed ports, addresses or routes in the namespaces:
the runner gives each instance a link of its own, identical to the shared
one, with its own iperf3 server), ``suites`` (the built-in suites that
measure it without naming it, each with the variants it takes there: ``""``
its default variants, ``"*"`` every one; :func:`cryptcost.stacks.in_suite`).

Reference implementation: :mod:`cryptcost.stacks.tcp`.
"""

from __future__ import annotations

import itertools
import os
import re
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from cryptcost import proc
from cryptcost.engines.tcpdump import Packet
from cryptcost.errors import Unavailable
from cryptcost.host import kernel
from cryptcost.host import tools as host_tools
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import FEATURE_HINTS, Stack


_SUBNETS = itertools.count()


def _program(d: proc.Daemon) -> str:
    """The program a daemon runs, behind ``ip netns exec NS``."""
    return os.path.basename(proc.program(d.argv))


@dataclass(frozen=True)
class Endpoint:
    """Where a client at end ``a`` connects: ``host``:``port``."""

    host: str
    port: int


class NetworkStack(Stack):
    """A network stack. See the module docstring for the call order."""

    kind = "network"
    features = ("netns", "veth")
    traffic: ClassVar[str] = "stream"
    links: ClassVar[tuple[str, ...]] = ("netns", "loopback")
    transport: ClassVar[str] = "TCP"
    # needs the link's namespaces to itself (fixed ports, routes)
    exclusive: ClassVar[bool] = False
    # suite → "" (default variants) or "*"
    suites: ClassVar[dict[str, str]] = {"standard": "", "full": "*"}
    # A stack the kernel can run itself (WireGuard, ESP), with a userspace fallback where it cannot:
    kernel_features: ClassVar[tuple[str, ...]] = ()          # all present: the kernel path
    userspace_tools: ClassVar[tuple[Tool, ...]] = ()         # needed only for the fallback
    userspace_features: ClassVar[tuple[str, ...]] = ()

    # What every network stack's measurement uses: the link, the traffic and the wire check.
    COMMON_TOOLS: ClassVar[tuple[str, ...]] = ("ip", "iperf3", "tcpdump")

    @classmethod
    def needed_tools(cls) -> list[Tool]:
        own = super().needed_tools()
        return [host_tools.tool(t) for t in cls.COMMON_TOOLS
                if t not in {x.name for x in own}] + own

    @classmethod
    def in_kernel(cls) -> bool:
        """Whether this host's kernel runs the stack itself (see ``kernel_features``)."""
        present = kernel.features()
        return bool(cls.kernel_features) and all(present.get(f, {}).get("present")
                                                 for f in cls.kernel_features)

    @classmethod
    def require(cls) -> None:
        """The features, then the common tools; then the kernel path, or else the userspace
        fallback's."""
        present = kernel.features()
        for feat in cls.features:
            if not present.get(feat, {}).get("present"):
                raise cls.missing(feat)
        for t in cls.needed_tools():
            if t not in cls.userspace_tools and not t.path():
                raise Unavailable(f"{t.binary} is not installed", cls.install_command())
        if not cls.kernel_features or cls.in_kernel():
            return
        missing = [FEATURE_HINTS.get(f, (f"the kernel lacks {f}", f"a kernel with {f}"))
                   for f in cls.kernel_features if not present.get(f, {}).get("present")]
        lacks = "; ".join(reason for reason, _ in missing)
        kernel_fix = " and ".join(fix.removeprefix("a kernel with ") for _, fix in missing)
        for t in cls.userspace_tools:
            if not t.path():
                raise Unavailable(f"{lacks}, and the userspace fallback ({t.name}) "
                                  "is not installed",
                                  f"{cls.install_command()}, or a kernel with {kernel_fix}")
        for feat in cls.userspace_features:
            if not present.get(feat, {}).get("present"):
                reason, install = FEATURE_HINTS.get(feat, (f"the kernel lacks {feat}", None))
                raise Unavailable(f"{lacks}, and the userspace fallback needs what is "
                                  f"missing: {reason}", install)

    def accel_switch(self) -> str | None:
        if self.in_kernel():
            return (f"acceleration cannot be switched off from userspace for {self.name} in the "
                    "kernel (it needs a kernel booted with its SIMD crypto drivers blacklisted)")
        return super().accel_switch()

    def __init__(self, variant: str | None = None):
        super().__init__(variant)
        self.ends: dict[str, list[proc.Daemon]] = {"a": [], "b": []}
        self.link: Link | None = None
        self.negotiated: dict = {}

    @abstractmethod
    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        """Build the stack on ``link``; return where ``a`` reaches ``service`` on ``b``."""

    def verify(self, res: Resources) -> dict:
        """What was negotiated, read back from the stack (empty: nothing to read)."""
        return {}

    @staticmethod
    def inner_addresses(net: str) -> dict[str, str]:
        """A tunnel's inner addresses ``NET.k.1`` (end a) and ``NET.k.2`` (end b): a /24 of
        ``NET``/16 per instance, so that instances sharing a host (one peer) never claim the
        same one."""
        k = next(_SUBNETS) % 250
        return {"a": f"{net}.{k}.1", "b": f"{net}.{k}.2"}

    def start(self, res: Resources, end: str, argv: list[str], *, name: str,
              env: dict | None = None,
              logdir: Path | None = None) -> proc.Daemon:
        """Start a daemon of this stack at ``end``, journalled, its output in ``logdir``."""
        logfile = str(logdir / f"{name}.log") if logdir else None
        if not self.accel:
            env = {**(env or {}), **self.accel_env()}
        daemon = self.link.at(end).daemon(argv, env=env, logfile=logfile)
        self.ends[end].append(daemon)
        return daemon

    def end_pids(self) -> dict[str, list[int]]:
        """The stack's processes at each end (their CPU is that end's)."""
        return {end: [d.pid for d in ds] for end, ds in self.ends.items()}

    def daemon_pids(self) -> list[int]:
        return [pid for pids in self.end_pids().values() for pid in pids]

    def daemon_names(self) -> dict[int, str]:
        """Each daemon's pid → ``program@end`` (its CPU is reported under that name)."""
        return {d.pid: f"{_program(d)}@{end}" for end, daemons in self.ends.items()
                for d in daemons}

    def dead(self) -> str | None:
        """Why the stack no longer works (a daemon exited), or None."""
        for end, daemons in self.ends.items():
            for d in daemons:
                if not d.alive():
                    return (f"{_program(d)} at end {end} exited ({d.returncode}) during "
                            "the measurement")
        return None

    def leak(self, packet: Packet, service: int) -> str | None:
        """Why ``packet`` shows plaintext, or None (see the module docstring): one that carries
        data to or from the service's own port. An empty one (a SYN, an ACK, a FIN) carries
        none: the plaintext baseline's connection, torn down just after its sample, sends its
        last FIN and ACK into the next sample's capture."""
        if (packet.proto in (6, 17) and service in (packet.sport, packet.dport)
                and packet.payload):
            return f"a packet to or from the plaintext service port {service}"
        return None

    def sealed(self, packet: Packet) -> bytes:
        """The part of ``packet``'s payload that must be ciphertext: all of it,
        unless the protocol frames its ciphertext with plaintext headers."""
        return packet.payload

    def describe(self) -> dict:
        d = super().describe()
        d["traffic"], d["transport"] = self.traffic, self.transport
        if self.link is not None:
            d["link"] = self.link.describe()
        if self.negotiated:
            d["negotiated"] = dict(self.negotiated)
        return d

    def confidential(self) -> bool | str:
        """True when this variant must hide its payload on the wire; else
        why it does not (a variant that authenticates without encrypting)."""
        return True


class FileShareStack(NetworkStack):
    """A network file share (SMB3, NFS): the workload copies files to and
    from a share served at end ``b``, from a client at end ``a``.

    ``setup`` returns the server's endpoint; ``share`` is the directory the
    server exports (on this host, so that every transfer is checked
    against its checksum); ``put``/``get`` copy files and return the
    client's CPU-seconds."""

    traffic = "files"
    share: Path

    @abstractmethod
    def put(self, res: Resources, files: list[Path], remote_dir: str) -> None:
        """Copy local ``files`` into ``remote_dir`` of the share, from end ``a``."""

    @abstractmethod
    def get(self, res: Resources, names: list[str], local_dir: Path) -> None:
        """Copy ``names`` (relative to the share) into ``local_dir``, from end ``a``."""

    def mountpoint(self) -> Path | None:
        """Where this host sees the share through the stack's client (a kernel client's mount),
        for a workload that runs in a directory (dbench); None where the client is a program
        that copies (smbclient)."""
        return None

    def forget(self, names: list[str]) -> None:
        """Drop what the client caches of ``names``, before a ``get`` and outside
        its clock, so that the read crosses the link (a kernel client keeps
        pages; a client program that exits keeps nothing: the default)."""


XFRM_KEY = r"0x[0-9a-fA-F]{16,}"          # a key in ``ip xfrm state``'s listing (SPIs are shorter)


def xfrm_states(at) -> list[tuple[str, int]]:
    """End ``at``'s xfrm states as ``ip -s xfrm state`` lists them, each key masked before the
    listing leaves the end: each state's text, and the bytes it carried."""
    listing = at.run(["sh", "-c", f"ip -s xfrm state list | sed -E 's/{XFRM_KEY}/<key>/g'"],
                     timeout=30).stdout
    out = []
    for block in re.split(r"\n(?=src )", listing.strip()):
        if block:
            moved = re.search(r"lifetime current:\s*\n?\s*(\d+)\(bytes\)", block)
            out.append((block, int(moved.group(1)) if moved else 0))
    return out
