"""Links: where a network stack's traffic flows, as media are for storage.

A :class:`Link` has two ends, ``a`` (the client) and ``b`` (the server).
Network stacks are built on a link and do not care which one it is:

* ``netns`` (the default) — two network namespaces ``cc-<id>-a`` and
  ``cc-<id>-b`` joined by a veth pair, with addresses that exist only
  inside them. Both ends share this machine's CPUs. With a delay, each
  end's veth holds its packets for half of it (netem), so a round trip
  takes that much longer.
* ``loopback`` — both ends in this host's namespace, on 127.0.0.1.
* ``peer:HOST`` — this host is end ``a``; end ``b`` is another machine,
  reached with ``ssh`` and held there by ``cryptcost worker``
  (:mod:`cryptcost.links.peer`).

Call order: ``setup(res)`` (everything through the journal, released in
reverse order), then ``at(end)`` is that end (:mod:`cryptcost.links.ends`):
where a stack runs its commands and daemons and keeps its files.
"""

from __future__ import annotations

import os
import secrets
import socket
from abc import ABC, abstractmethod
from typing import ClassVar

from cryptcost import proc
from cryptcost.errors import CryptcostError, UserError
from cryptcost.host import netns
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.links.ends import End, LocalEnd

MTUS = range(576, 65537)
MAX_DELAY_MS = 1000.0
# netem's queue, in packets: deep enough that no packet the delay holds back is dropped (TCP's
# windows bound what is in flight, not this limit).
NETEM_LIMIT = 100_000


@releaser("netns")
def release_netns(data: dict) -> None:
    """Delete our namespace (its veth end goes with it, and its peer too)."""
    name = data["name"]
    if os.path.exists(f"/run/netns/{name}"):
        proc.run(["ip", "netns", "delete", name], check=False, timeout=30)


class Link(ABC):
    """Two ends and the addresses between them. See the module docstring."""

    name: ClassVar[str]
    a_addr: str
    b_addr: str
    server_bind: ClassVar[str]         # where a service at end b listens
    wire_checked: ClassVar[bool]       # whether captures of iface() see only what crosses the link

    # why a delay cannot be added to this link's traffic, or None (where cryptcost owns the wire)
    no_delay: ClassVar[str | None] = None

    def __init__(self, mtu: int = 1500, delay_ms: float = 0.0):
        if mtu not in MTUS:
            raise UserError(f"bad --mtu {mtu}: use 576 … 65536 (1500 and 9000 are usual)")
        if not 0 <= delay_ms <= MAX_DELAY_MS:
            raise UserError(f"bad --delay {delay_ms:g}: use 0 … {MAX_DELAY_MS:g} ms of added round "
                            "trip (20 is a country, 100 a continent)")
        if delay_ms and self.no_delay:
            raise UserError(f"--delay on a {self.name} link: {self.no_delay}")
        self.mtu = mtu
        self.delay_ms = delay_ms
        self.rtt_ms: float | None = None
        self.used_ports: set[int] = set()
        self.res: Resources | None = None
        self._ends: dict[str, End] = {}
        self._offloads: dict[str, dict[str, str]] = {}

    def setup(self, res: Resources) -> None:
        """Create the link's ends, journalled in ``res``."""
        self.res = res
        self.create(res)

    @abstractmethod
    def create(self, res: Resources) -> None:
        """Create what the link needs (namespaces, a session), journalled."""

    def at(self, end: str) -> End:
        """End ``a`` or ``b`` (after :meth:`setup`)."""
        if end not in self._ends:
            self._ends[end] = LocalEnd(self.res, lambda argv, end=end: self.argv(end, argv),
                                       netns=self.namespace(end))
        return self._ends[end]

    # why end b's speeds are not real hardware's (a peer that is cryptcost vm's guest), or None
    emulated_peer: str | None = None

    def namespace(self, end: str) -> str | None:
        """The network namespace (``ip netns``'s name) a local end is in; None: this process's."""
        return None

    @abstractmethod
    def argv(self, end: str, argv: list[str]) -> list[str]:
        """``argv`` to run at end ``a`` or ``b`` of a link on this host."""

    @abstractmethod
    def iface(self, end: str) -> str:
        """The interface of ``end`` that the link's traffic crosses (for captures)."""

    shared_cpus: ClassVar[bool] = True     # both ends run on this machine

    def unavailable(self, stack: str) -> str | None:
        """Why ``stack`` cannot hold this link's end ``b`` (a peer's own probe), or None."""
        return None

    def mount_argv(self, end: str, argv: list[str]) -> list[str]:
        """``argv`` in ``end``'s network namespace but this host's mount
        namespace: a network filesystem it mounts (whose socket lives in the
        mounting process's network namespace) is seen by every process here.
        :meth:`argv` gives each command a mount namespace of its own."""
        return list(argv)

    def port(self, default: int) -> int:
        """A TCP/UDP port for a service on this link, never handed out twice:
        ``default`` (or the next unused one) where the link's namespaces are
        private to this run."""
        port = default
        while port in self.used_ports:
            port += 1
        self.used_ports.add(port)
        return port

    def listening(self, end: str, port: int) -> bool:
        """Whether a TCP socket listens on ``port`` at ``end``."""
        return self.at(end).listening(port)

    def has_iface(self, end: str, dev: str) -> bool:
        """Whether network interface ``dev`` exists at ``end``."""
        return self.at(end).run(["ip", "link", "show", dev], check=False,
                                timeout=10).returncode == 0

    def offloads(self, end: str) -> dict[str, str]:
        """GSO/GRO/TSO state of an end's interface (ethtool -k), where ethtool is installed: read
        once an end (every result of the link describes it)."""
        if end not in self._offloads:
            self._offloads[end] = self._read_offloads(end)
        return self._offloads[end]

    def _read_offloads(self, end: str) -> dict[str, str]:
        if not proc.which("ethtool"):
            return {}
        try:
            done = self.at(end).run(["ethtool", "-k", self.iface(end)], check=False, timeout=30)
        except CryptcostError:                 # no ethtool at that end (a peer): not known
            return {}
        wanted = ("generic-segmentation-offload", "generic-receive-offload",
                  "tcp-segmentation-offload")
        return {k: v.split()[0] for line in done.stdout.splitlines()
                for k, _, v in [line.partition(":")] if k.strip() in wanted and v.strip()}

    def describe(self) -> dict:
        d = {"link": self.name, "mtu": self.mtu, "rtt_ms": self.rtt_ms}
        if self.delay_ms:
            d["delay_ms"] = self.delay_ms
            d["delay"] = (f"netem holds each end's packets for {self.delay_ms / 2:g} ms: "
                          f"{self.delay_ms:g} ms added to every round trip")
        return d


class NetnsLink(Link):
    """Two network namespaces joined by a veth pair (10.203.0.1 ↔ .2/30)."""

    name = "netns"
    a_addr, b_addr = "10.203.0.1", "10.203.0.2"
    server_bind = "0.0.0.0"            # inside namespace b only
    wire_checked = True

    def create(self, res: Resources) -> None:
        tag = secrets.token_hex(3)
        self.ns = {"a": f"cc-{tag}-a", "b": f"cc-{tag}-b"}
        for end, ns in self.ns.items():
            res.track("netns", lambda e, ns=ns: proc.run(["ip", "netns", "add", ns], timeout=30),
                      name=ns)
        veth_a, veth_b = f"cc{tag}a", f"cc{tag}b"
        self.veth = {"a": veth_a, "b": veth_b}
        # The pair lives in namespace a from birth; deleting a namespace deletes its end and the
        # peer.
        # Each namespace's commands as one ip -batch: a process start each, not four (a second
        # in an emulated guest).
        first = [f"link add {veth_a} mtu {self.mtu} type veth peer name {veth_b} netns "
                 f"{self.ns['b']} mtu {self.mtu}"]
        for end, addr in (("a", self.a_addr), ("b", self.b_addr)):
            ns, dev = self.ns[end], self.veth[end]
            lines = (first if end == "a" else []) + [
                f"addr add {addr}/30 dev {dev}", f"link set {dev} up", "link set lo up"]
            proc.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n", timeout=30)
            if self.delay_ms:
                # the qdisc lives on the veth end, and goes with the journalled namespace
                proc.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay",
                          f"{self.delay_ms / 2:g}ms", "limit", str(NETEM_LIMIT)], timeout=30)
        self.rtt_ms = self.round_trip()

    def round_trip(self) -> float | None:
        """One round trip from end a to end b, in ms (the median of five TCP connects that b
        refuses at once, made from namespace a by a thread of this process: no probe to start),
        or None where a connect was not refused."""
        return netns.joined(self.ns["a"], lambda: netns.round_trip(self.b_addr, 9))

    def argv(self, end: str, argv: list[str]) -> list[str]:
        return netns.inside(self.ns[end], argv)

    def namespace(self, end: str) -> str | None:
        return self.ns[end]

    def iface(self, end: str) -> str:
        return self.veth[end]

    shared_cpus: ClassVar[bool] = True     # both ends run on this machine

    def unavailable(self, stack: str) -> str | None:
        """Why ``stack`` cannot hold this link's end ``b`` (a peer's own probe), or None."""
        return None

    def mount_argv(self, end: str, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.ns[end]}", *argv]

    def describe(self) -> dict:
        d = super().describe()
        d["namespaces"] = dict(getattr(self, "ns", {}))
        d["offloads"] = {end: self.offloads(end)
                         for end in ("a", "b")} if hasattr(self, "ns") else {}
        d["shared_cpus"] = "both ends share this machine's CPUs"
        return d


class LoopbackLink(Link):
    """Both ends in this host's namespace, on 127.0.0.1 (for comparison)."""

    name = "loopback"
    a_addr = b_addr = "127.0.0.1"
    server_bind = "127.0.0.1"
    wire_checked = False               # lo also carries a forwarder's plaintext leg to the service
    no_delay = ("a delay on lo would slow every local connection of this host: use --link netns, "
                "whose veth cryptcost owns")

    def create(self, res: Resources) -> None:
        return None

    def argv(self, end: str, argv: list[str]) -> list[str]:
        return list(argv)

    def iface(self, end: str) -> str:
        return "lo"

    def port(self, default: int) -> int:
        """A port the kernel says is free on 127.0.0.1 (others may use the default)."""
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in self.used_ports:
                self.used_ports.add(port)
                return port


LINKS = {cls.name: cls for cls in (NetnsLink, LoopbackLink)}


def parse_link(spec: str, mtu: int = 1500, peer=None, delay_ms: float = 0.0) -> Link:
    """``netns``, ``loopback`` or ``peer:HOST`` (``peer``: its
    :class:`~cryptcost.links.peer.PeerOptions`), with ``delay_ms`` added to its round trips."""
    if spec.startswith("peer:"):
        from cryptcost.links.peer import PeerLink, PeerOptions
        return PeerLink(spec.removeprefix("peer:"), mtu, peer or PeerOptions(), delay_ms)
    if spec not in LINKS:
        raise UserError(f"bad --link {spec!r}: use {', '.join(LINKS)} or peer:HOST")
    return LINKS[spec](mtu, delay_ms)
