"""``ipsec``: an IKEv2 tunnel with a pre-shared key, one strongSwan charon
at each end of the link (private configuration, VICI socket and logs).

Where the kernel has ESP and xfrm, the SAs go to the kernel (R5's path);
otherwise strongSwan's ``kernel-libipsec`` plugin runs ESP in userspace
over a TUN device, always encapsulated in UDP 4500. The result records
which one ran. Each variant is one ESP proposal (R5's cipher/auth matrix,
as far as strongSwan has it); :meth:`verify` reads the installed CHILD_SA
back with ``swanctl --list-sas``. A ``-ipcomp`` variant compresses with IPComp (DEFLATE)
before ESP, as R5 wanted to measure and could not (its benchmark sent zeros): kernel ESP
only, against the same proposal without it, on the ``compressible`` workload too; its
IPComp states are read back with ``ip -s xfrm state``.
"""

from __future__ import annotations

import base64
import re
import secrets

from cryptcost import proc
from cryptcost.errors import CryptcostError, Unavailable
from cryptcost.host import kernel
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack, xfrm_states

CHARON = Tool("charon-systemd", "charon-systemd", "charon-systemd", ())
LIBIPSEC_SO = "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"
SWANCTL = Tool("swanctl", "swanctl", "strongswan-swanctl", ("swanctl", "--version"),
               r"strongSwan (\d+(?:\.\d+)+)")
PLUGINS = Tool("strongswan-plugins", "charon-systemd", "libstrongswan-standard-plugins", ())
LIBIPSEC = Tool("kernel-libipsec", LIBIPSEC_SO, "libcharon-extra-plugins", ())
EXTRA = Tool("strongswan-extra", "charon-systemd", "libstrongswan-extra-plugins", ())
LOAD = ("kdf random nonce openssl aes sha1 sha2 md5 hmac xcbc cmac ctr gcm ccm chapoly curve25519 "
        "pem pkcs1 x509 pubkey {kernel} socket-default vici updown")

# variant → (ESP proposal, what swanctl shows, the cipher table's nearest algorithm or None): with
# null encryption, its MAC; AES-XCBC-MAC, which the table has not, is a CBC-MAC of AES-128, as
# much AES work per byte as aes-128-cbc
PROPOSALS = {
    "aes128gcm16": ("aes128gcm16", "AES_GCM_16-128", "aes-128-gcm"),
    "aes256gcm16": ("aes256gcm16", "AES_GCM_16-256", "aes-256-gcm"),
    "chacha20poly1305": ("chacha20poly1305", "CHACHA20_POLY1305", "chacha20-poly1305"),
    "aes128-sha256": ("aes128-sha256", "AES_CBC-128/HMAC_SHA2_256_128", "aes-128-cbc"),
    "aes256-sha256": ("aes256-sha256", "AES_CBC-256/HMAC_SHA2_256_128", "aes-256-cbc"),
    "aes128-sha1": ("aes128-sha1", "AES_CBC-128/HMAC_SHA1_96", "aes-128-cbc"),
    "aes128ctr-sha1": ("aes128ctr-sha1", "AES_CTR-128/HMAC_SHA1_96", "aes-128-ctr"),
    "aes128-md5": ("aes128-md5", "AES_CBC-128/HMAC_MD5_96", "aes-128-cbc"),
    "aes128-aesxcbc": ("aes128-aesxcbc", "AES_CBC-128/AES_XCBC_96", "aes-128-cbc"),
    "aes128ctr-aesxcbc": ("aes128ctr-aesxcbc", "AES_CTR-128/AES_XCBC_96", "aes-128-ctr"),
    "3des-sha1": ("3des-sha1", "3DES_CBC/HMAC_SHA1_96", "des-ede3-cbc"),
    "3des-md5": ("3des-md5", "3DES_CBC/HMAC_MD5_96", "des-ede3-cbc"),
    "blowfish128-sha1": ("blowfish128-sha1", "BLOWFISH_CBC-128/HMAC_SHA1_96", "bf-cbc"),
    "null-sha256": ("null-sha256", "NULL/HMAC_SHA2_256_128", "hmac-sha256"),
    "null-sha1": ("null-sha1", "NULL/HMAC_SHA1_96", "hmac-sha1"),
    "null-md5": ("null-md5", "NULL/HMAC_MD5_96", "hmac-md5"),
    "null-aesxcbc": ("null-aesxcbc", "NULL/AES_XCBC_96", "aes-128-cbc"),
}
# a proposal's integrity algorithm → the cipher table's cell for it, run over the same bytes after
# its cipher (ESP encrypts, then MACs): AES-XCBC's nearest is aes-128-cbc
MACS = {"sha256": "hmac-sha256", "sha1": "hmac-sha1", "md5": "hmac-md5", "aesxcbc": "aes-128-cbc"}
# variant → the proposal it runs with IPComp (DEFLATE) before ESP; its twin is that proposal
IPCOMP = {"aes128-sha1-ipcomp": "aes128-sha1"}
_NULL = "null encryption: authenticated, not confidential"
WEAK = {"3des-sha1": "3DES has 64-bit blocks and is obsolete",
        "3des-md5": "3DES has 64-bit blocks and is obsolete, and so is HMAC-MD5",
        "blowfish128-sha1": "Blowfish has 64-bit blocks and is obsolete",
        "aes128-md5": "HMAC-MD5 is obsolete",
        "null-sha256": _NULL, "null-sha1": _NULL, "null-aesxcbc": _NULL,
        "null-md5": f"{_NULL}; HMAC-MD5 is obsolete"}


class Ipsec(NetworkStack):
    name = "ipsec"
    description = "IKEv2/ESP tunnel with strongSwan (kernel ESP, or kernel-libipsec over TUN)"
    layer = "kernel"
    use_case = "site-to-site"
    baselines = ("tcp",)
    security = ("IPsec with a pre-shared key is only as strong as that key; the proposal decides "
                "the cipher, and the legacy ones (3DES, Blowfish, HMAC-MD5, null) are still "
                "accepted if configured",
                "strongSwan's kernel-libipsec, the fallback where the kernel lacks ESP, runs ESP "
                "in userspace over TUN, always inside UDP 4500")
    tools = (CHARON, SWANCTL, PLUGINS, LIBIPSEC, EXTRA)
    kernel_features = ("esp", "xfrm")
    userspace_tools = (LIBIPSEC,)
    userspace_features = ("tun",)
    links = ("netns", "peer")
    exclusive = True
    variants = {**{name: {"esp": p[0], "expect": p[1],
                          "algorithm": p[2]} for name, p in PROPOSALS.items()},
                **{name: {"esp": PROPOSALS[of][0], "expect": PROPOSALS[of][1],
                          "algorithm": PROPOSALS[of][2], "ipcomp": True,
                          "baselines": ["tcp", f"ipsec:{of}"]} for name, of in IPCOMP.items()}}
    default_variants = ("aes128gcm16",)
    crypto_library = "openssl"

    @classmethod
    def variant_unavailable(cls, variant: str) -> Unavailable | None:
        """IPComp only with the kernel's ESP: kernel-libipsec, the fallback, has none."""
        if not cls.variants[variant].get("ipcomp") or cls.kernel_esp():
            return None
        return Unavailable("IPComp needs the kernel's ESP (kernel-libipsec, which runs ESP "
                           "here, has no IPComp)",
                           "a kernel with CONFIG_INET_ESP and CONFIG_INET_IPCOMP; or emulated, "
                           "under Debian's stock kernel in a qemu guest: cryptcost vm -- network "
                           f"--stacks ipsec:{variant}", guest="")

    @classmethod
    def kernel_esp(cls) -> bool:
        """Whether this host's kernel runs ESP (else kernel-libipsec does, in userspace)."""
        present = kernel.features()
        return all(present.get(f, {}).get("present") for f in cls.kernel_features)

    def confidential(self) -> bool | str:
        return WEAK[self.variant] if self.params["esp"].startswith("null") else True

    def cipher_ref(self) -> dict | None:
        alg, esp = self.params["algorithm"], self.params["esp"]
        if not alg:
            return None
        cipher, _, integrity = esp.rpartition("-")          # AEADs have no separate integrity
        mac = MACS.get(integrity) if cipher and cipher != "null" else None
        # The kernel's crypto where the kernel runs ESP (once set up: what both ends run, the
        # slower, userspace one where they differ); before, what this host's kernel would run.
        impl = self.params.get("implementation")
        kernel_esp = "libipsec" not in impl if impl else self.kernel_esp()
        return ref(alg, "kernel" if kernel_esp else "userspace", unit=1400,
                   exact="aesxcbc" not in esp, then=mac)

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        ends = {end: link.at(end) for end in ("a", "b")}
        kernel = {end: all(at.kernel_features().get(f) for f in self.kernel_features)
                  for end, at in ends.items()}
        impl = {end: "kernel ESP" if k else "kernel-libipsec" for end, k in kernel.items()}
        self.params["implementation"] = (impl["a"] if impl["a"] == impl["b"]
                                         else f"a: {impl['a']}, b: {impl['b']}")
        if self.params.get("ipcomp") and not all(kernel.values()):
            raise CryptcostError("IPComp needs the kernel's ESP at both ends (kernel-libipsec "
                                 "has no IPComp); emulated, under Debian's stock kernel: "
                                 f"cryptcost vm -- network --stacks ipsec:{self.variant}")
        self.layer = "kernel" if kernel["a"] else "userspace"
        psk = base64.b64encode(secrets.token_bytes(32)).decode()
        inner = self.inner_addresses("10.205")
        # IKE's two ports, free at both ends: 500 and 4500 on a link of its own; others where
        # several instances share a host (a peer), each then reaching the other's directly.
        ike, natt = link.port(500), link.port(4500)
        moved = (ike, natt) != (500, 4500)
        self.vici, self.dirs = {}, {}
        for end, peer in (("a", "b"), ("b", "a")):
            at = ends[end]
            d = self.dirs[end] = at.tmpdir("cryptcost-ipsec-")
            # kernel-libipsec must come before kernel-netlink, so that it, not the kernel, gets
            # the SAs
            load = LOAD.format(kernel="kernel-netlink" if kernel[end]
                               else "kernel-libipsec kernel-netlink")
            if not self.accel:
                # strongSwan's own C plugins (aes, gcm, chapoly …) instead of OpenSSL's; OpenSSL
                # is switched off too
                load = load.replace("openssl ", "")
                self.params["plugins"] = "no openssl plugin, OPENSSL_ia32cap off"
            me, other = getattr(link, f"{end}_addr"), getattr(link, f"{peer}_addr")
            self.vici[end] = f"unix://{d}/charon.vici"
            at.write(d / "strongswan.conf", (
                "charon-systemd {\n  load = " + load + "\n  install_routes = yes\n"
                f"  port = {ike}\n  port_nat_t = {natt}\n  plugins {{\n"
                f"    vici {{ socket = {self.vici[end]} }}\n    kernel-libipsec {{ allow_peer_ts = "
                "yes }\n  }\n  filelog { stderr { default = 1 ike = 1 cfg = 1 } }\n  "
                "journal { default = -1 }\n}\n").encode())
            ports = f"\n remote_port = {natt}\n encap = yes" if moved else ""
            conf = (f"connections {{ cc {{ version = 2\n local_addrs = {me}\n remote_addrs = "
                    f"{other}{ports}\n proposals = aes128gcm16-prfsha256-x25519\n local {{ auth = "
                    f"psk\n id = {me} }}\n remote {{ auth = psk\n id = {other} }}\n children {{ cc "
                    f"{{ local_ts = {inner[end]}/32\n remote_ts = {inner[peer]}/32\n esp_proposals "
                    f"= {self.params['esp']}\n"
                    + (" ipcomp = yes\n" if self.params.get("ipcomp") else "")
                    + " start_action = none } } } }\n")
            secret = (f"secrets {{ ike-cc {{ id-a = {link.a_addr}\n id-b = {link.b_addr}\n secret "
                      f"= 0s{psk} }} }}\n")
            held = at.secret_file(secret.encode(),
                                  name=f"ipsec-{end}-{secrets.token_hex(3)}.conf")
            at.write(d / "swanctl.conf", f"{conf}include {held}\n".encode())
            env = {"STRONGSWAN_CONF": str(d / "strongswan.conf")}
            before = set() if kernel[end] else _tuns(at)      # kernel-libipsec makes a TUN device
            daemon = self.start(res, end, ["charon-systemd"], name=f"charon-{end}", env=env,
                                logdir=d)
            proc.wait_for(lambda at=at, d=d: at.is_socket(d / "charon.vici"),
                          timeout=30, daemon=daemon, what="charon's VICI socket")
            dev = "lo"
            if not kernel[end]:
                proc.wait_for(lambda at=at: _tuns(at) - before, timeout=20, daemon=daemon,
                              what="kernel-libipsec's TUN device")
                dev = min(_tuns(at) - before)
            at.address(f"{inner[end]}/32", dev)
            if dev != "lo":                         # lo is up at every end
                at.run(["ip", "link", "set", dev, "up"], timeout=30)
            swanctl = ["env", f"STRONGSWAN_CONF={d}/strongswan.conf", "swanctl"]
            at.run(swanctl + ["--load-all", "--noprompt", "--file", str(d / "swanctl.conf"),
                              "--uri", self.vici[end]], timeout=60)
        done = ends["a"].run(["swanctl", "--initiate", "--child", "cc", "--timeout", "30", "--uri",
                              self.vici["a"]], timeout=60, check=False)
        if done.returncode != 0:
            raise CryptcostError("IKE negotiation failed: "
                                 f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}")
        return Endpoint(inner["b"], service)

    def verify(self, res: Resources) -> dict:
        """The CHILD_SA's mode and ESP proposal, from swanctl, with bytes counted both ways."""
        text = self.link.at("a").run(["swanctl", "--list-sas", "--uri", self.vici["a"]],
                                     timeout=30).stdout
        m = re.search(r"INSTALLED, (\S+), ESP:(\S+)", text)
        if not m:
            raise CryptcostError("swanctl lists no installed CHILD_SA")
        mode, proposal = m.group(1).rstrip(","), m.group(2).rstrip(",")
        # ChaCha20-Poly1305's key is always 256 bits: strongSwan names the size with libipsec only
        proposal = proposal.replace("CHACHA20_POLY1305-256", "CHACHA20_POLY1305")
        self.expect("ESP proposal", proposal, self.params["expect"])
        counts = [int(x) for x in re.findall(r"(?:in|out)\s+\S+,\s+(\d+) bytes", text)]
        if not counts or min(counts) == 0:
            raise CryptcostError(f"the CHILD_SA carried no traffic ({counts})")
        self.negotiated = {"implementation": self.params["implementation"], "mode": mode,
                           "esp": proposal,
                           "from": "swanctl --list-sas"}
        if self.params.get("ipcomp"):
            self.negotiated["ipcomp"] = self._ipcomp()
        if self.variant in WEAK:
            self.params["warning"] = WEAK[self.variant]
        return self.negotiated

    def _ipcomp(self) -> dict:
        """The kernel's IPComp states at end a (keys masked): DEFLATE, and traffic through them."""
        states = [{"comp": m.group(1) if (m := re.search(r"(?m)^\s+comp (\w+)", block)) else None,
                   "bytes": moved}
                  for block, moved in xfrm_states(self.link.at("a"))
                  if re.search(r"proto comp\b", block)]
        if len(states) < 2 or any(st["comp"] != "deflate" for st in states):
            raise CryptcostError(f"ipsec: IPComp asked for, but end a's kernel holds {states}")
        if not any(st["bytes"] for st in states):
            raise CryptcostError("ipsec: the IPComp states carried no traffic")
        return {"comp": "deflate", "states": len(states),
                "bytes": [st["bytes"] for st in states], "from": "ip -s xfrm state (keys masked)"}


def _tuns(at) -> set[str]:
    """The kernel-libipsec TUN devices (``ipsecN``) at an end."""
    import json
    got = at.run(["ip", "-j", "link", "show"], timeout=10).stdout
    return {d["ifname"] for d in json.loads(got or "[]") if d["ifname"].startswith("ipsec")}
