"""``wireguard``: a WireGuard tunnel between the link's ends — the kernel
module where the kernel has it, wireguard-go over TUN otherwise. The
result records which one ran (``implementation``), and :meth:`verify`
reads the handshake and the transfer counters back with ``wg show``.

Keys are fresh: each end's private key is 32 random bytes (base64) in a
0600 file on the key tmpfs, handed to ``wg set … private-key FILE``.
"""

from __future__ import annotations

import base64
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
INNER = {"a": "10.204.0.1", "b": "10.204.0.2"}


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
    links = ("netns",)
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
        self.dir = res.tmpdir("cryptcost-wg-")
        tag = secrets.token_hex(2)
        keys, pubs = {}, {}
        for end in ("a", "b"):
            keys[end] = res.secret_file(base64.b64encode(secrets.token_bytes(32)) + b"\n",
                                        name=f"wg-{tag}-{end}.key")
            with open(keys[end], "rb") as fh:
                pubs[end] = proc.run(["wg", "pubkey"], input=fh.read(), timeout=10).stdout.strip()
        kernel_wg = self.in_kernel()
        self.params["implementation"] = "kernel" if kernel_wg else "wireguard-go"
        self.layer = "kernel" if kernel_wg else "userspace"
        env = {"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"}
        self.ifaces = {}
        for end in ("a", "b"):
            dev = f"ccwg{tag}{end}"
            self.ifaces[end] = dev
            if kernel_wg:
                proc.run(link.argv(end, ["ip", "link", "add", dev, "type", "wireguard"]),
                         timeout=30)
            else:
                daemon = self.start(res, end, ["wireguard-go", "-f", dev],
                                    name=f"wireguard-go-{end}",
                                    env=env, logdir=self.dir)
                proc.wait_for(lambda e=end, d=dev: link.has_iface(e, d), timeout=20, daemon=daemon,
                              what=f"TUN device {dev}")
        for end, peer in (("a", "b"), ("b", "a")):
            dev = self.ifaces[end]
            proc.run(link.argv(end, ["wg", "set", dev, "private-key", str(keys[end]), "listen-port",
                                     str(PORT),
                                     "peer", pubs[peer], "allowed-ips", f"{INNER[peer]}/32",
                                     "endpoint", f"{getattr(link, peer + '_addr')}:{PORT}"]),
                     timeout=30)
            proc.run(link.argv(end, ["ip", "addr", "add", f"{INNER[end]}/24", "dev", dev]),
                     timeout=30)
            proc.run(link.argv(end, ["ip", "link", "set", dev, "mtu", str(link.mtu - 80), "up"]),
                     timeout=30)
        self.params["tunnel_mtu"] = link.mtu - 80
        return Endpoint(INNER["b"], service)

    def verify(self, res: Resources) -> dict:
        """A handshake happened and bytes flowed both ways, per ``wg show``."""
        dump = proc.run(self.link.argv("a", ["wg", "show", self.ifaces["a"], "dump"]),
                        timeout=10).stdout
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

