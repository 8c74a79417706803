"""``wireguard``: a WireGuard tunnel between the link's ends — the kernel
module where the kernel has it, wireguard-go over TUN otherwise. The
result records which one ran (``implementation``), and :meth:`verify`
reads the handshake and the transfer counters back with ``wg show``.

Keys are fresh: each end makes its own private key (``wg genkey``) in a
0600 file on its key tmpfs, handed to ``wg set … private-key FILE``; only
the public keys cross between the ends. On a peer link each end runs the
kernel module where its own kernel has it.
"""

from __future__ import annotations

import secrets

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack

WG = Tool("wg", "wg", "wireguard-tools", ())
WG_GO = Tool("wireguard-go", "wireguard-go", "wireguard-go", ("wireguard-go", "--version"),
             r"wireguard-go v?([\w.+-]+)")
PORT = 51820


class Wireguard(NetworkStack):
    name = "wireguard"
    description = "WireGuard tunnel (kernel module, or wireguard-go over TUN)"
    layer = "kernel"
    use_case = "site-to-site"
    suites = {"quick": "", "standard": "", "full": ""}
    baselines = ("tcp",)
    security = ("WireGuard has one fixed suite (ChaCha20-Poly1305, Curve25519, BLAKE2s): nothing "
                "to negotiate or downgrade, and no choice of cipher",
                "wireguard-go, the fallback where the kernel lacks the module, runs in userspace "
                "over a TUN device and costs more CPU per packet than the kernel module")
    tools = (WG, WG_GO)
    kernel_features = ("wireguard",)
    userspace_tools = (WG_GO,)
    userspace_features = ("tun",)
    links = ("netns", "peer")
    exclusive = True
    transport = f"UDP {PORT}"
    crypto_library = "go"

    def cipher_ref(self) -> dict:
        # Both implementations encrypt and decrypt packets on every CPU (wireguard-go starts one
        # encryption and one decryption goroutine per CPU; the kernel, a worker per CPU).
        return ref("chacha20-poly1305",
                   "kernel" if self.params.get("implementation") == "kernel" else "go",
                   unit=1420, threads={"*": ("cpus", 0)})

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        tag = secrets.token_hex(2)
        inner = self.inner_addresses("10.204")
        ends = {end: link.at(end) for end in ("a", "b")}
        keys, pubs, ports, impl = {}, {}, {}, {}
        for end, at in ends.items():
            # Each end's private key is made there, on its key tmpfs, and never leaves it;
            # only the public key comes back.
            keys[end] = at.keydir() / f"wg-{tag}-{end}.key"
            pubs[end] = at.run(["sh", "-c", f"umask 077; wg genkey > {keys[end]}; "
                                f"wg pubkey < {keys[end]}"], timeout=10).stdout.strip()
            ports[end] = link.port(PORT)
            impl[end] = ("kernel" if all(at.kernel_features().get(f)
                                         for f in self.kernel_features) else "wireguard-go")
        same = len(set(impl.values())) == 1
        self.params["implementation"] = (impl["a"] if same
                                         else f"a: {impl['a']}, b: {impl['b']}")
        self.layer = "kernel" if impl["a"] == "kernel" else "userspace"
        env = {"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"}
        self.ifaces = {}
        for end, at in ends.items():
            dev = f"ccwg{tag}{end}"
            self.ifaces[end] = dev
            if impl[end] == "kernel":
                at.interface(dev, ["ip", "link", "add", dev, "type", "wireguard"])
            else:
                logdir = at.tmpdir("cryptcost-wg-")
                daemon = self.start(res, end, ["wireguard-go", "-f", dev],
                                    name=f"wireguard-go-{end}", env=env, logdir=logdir)
                proc.wait_for(lambda e=end, d=dev: link.has_iface(e, d), timeout=20, daemon=daemon,
                              what=f"TUN device {dev}")
        for end, peer in (("a", "b"), ("b", "a")):
            dev, at = self.ifaces[end], ends[end]
            at.run(["wg", "set", dev, "private-key", str(keys[end]), "listen-port",
                    str(ports[end]), "peer", pubs[peer], "allowed-ips", f"{inner[peer]}/32",
                    "endpoint", f"{getattr(link, peer + '_addr')}:{ports[peer]}"], timeout=30)
            at.run(["ip", "addr", "add", f"{inner[end]}/24", "dev", dev], timeout=30)
            at.run(["ip", "link", "set", dev, "mtu", str(link.mtu - 80), "up"], timeout=30)
        self.params["tunnel_mtu"] = link.mtu - 80
        self.transport_port = ports["b"]
        return Endpoint(inner["b"], service)

    def verify(self, res: Resources) -> dict:
        """A handshake happened and bytes flowed both ways, per ``wg show``."""
        dump = self.link.at("a").run(["wg", "show", self.ifaces["a"], "dump"], timeout=10).stdout
        lines = [line.split("\t") for line in dump.strip().splitlines()]
        if len(lines) < 2:
            raise CryptcostError("wg show lists no peer")
        peer = lines[1]            # public-key psk endpoint allowed-ips handshake rx tx keepalive
        handshake, rx, tx = int(peer[4]), int(peer[5]), int(peer[6])
        if not handshake or not rx or not tx:
            raise CryptcostError(f"wireguard: no handshake or no traffic (handshake {handshake}, "
                                 f"rx {rx}, tx {tx})")
        self.negotiated = {"implementation": self.params["implementation"],
                           "suite": "ChaCha20-Poly1305",
                           "handshake": True, "from": "wg show"}
        return self.negotiated
