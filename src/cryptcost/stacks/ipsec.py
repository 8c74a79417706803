"""``ipsec``: an IKEv2 tunnel with a pre-shared key, one strongSwan charon
at each end of the link (private configuration, VICI socket and logs).

Where the kernel has ESP and xfrm, the SAs go to the kernel (R5's path);
otherwise strongSwan's ``kernel-libipsec`` plugin runs ESP in userspace
over a TUN device, always encapsulated in UDP 4500. The result records
which one ran. Each variant is one ESP proposal (R5's cipher/auth matrix,
as far as strongSwan has it); :meth:`verify` reads the installed CHILD_SA
back with ``swanctl --list-sas``.
"""

from __future__ import annotations

import base64
import re
import secrets

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack

CHARON = Tool("charon-systemd", "charon-systemd", "charon-systemd", ())
LIBIPSEC_SO = "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"
SWANCTL = Tool("swanctl", "swanctl", "strongswan-swanctl", ("swanctl", "--version"),
               r"strongSwan (\d+(?:\.\d+)+)")
PLUGINS = Tool("strongswan-plugins", "charon-systemd", "libstrongswan-standard-plugins", ())
LIBIPSEC = Tool("kernel-libipsec", LIBIPSEC_SO, "libcharon-extra-plugins", ())
EXTRA = Tool("strongswan-extra", "charon-systemd", "libstrongswan-extra-plugins", ())
INNER = {"a": "10.205.0.1", "b": "10.205.0.2"}
LOAD = ("kdf random nonce openssl aes sha1 sha2 md5 hmac xcbc cmac ctr gcm ccm chapoly curve25519 "
        "pem pkcs1 x509 pubkey {kernel} socket-default vici updown")

# variant → (ESP proposal, what swanctl shows, the cipher table's nearest algorithm or None)
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
    "3des-sha1": ("3des-sha1", "3DES_CBC/HMAC_SHA1_96", "des-ede3-cbc"),
    "blowfish128-sha1": ("blowfish128-sha1", "BLOWFISH_CBC-128/HMAC_SHA1_96", "bf-cbc"),
    "null-sha256": ("null-sha256", "NULL/HMAC_SHA2_256_128", None),
}
WEAK = {"3des-sha1": "3DES has 64-bit blocks and is obsolete",
        "blowfish128-sha1": "Blowfish has 64-bit "
        "blocks and is obsolete", "aes128-md5": "HMAC-MD5 is obsolete",
        "null-sha256": "null encryption: "
        "authenticated, not confidential"}


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
    links = ("netns",)
    exclusive = True
    variants = {name: {"esp": p[0], "expect": p[1],
                       "algorithm": p[2]} for name, p in PROPOSALS.items()}
    default_variants = ("aes128gcm16",)
    crypto_library = "openssl"

    def confidential(self) -> bool | str:
        return WEAK[self.variant] if self.params["esp"].startswith("null") else True

    def cipher_ref(self) -> dict | None:
        alg = self.params["algorithm"]
        return ref(alg, "userspace", unit=1400) if alg else None

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        self.dir = res.tmpdir("cryptcost-ipsec-")
        kernel_esp = self.in_kernel()
        self.params["implementation"] = "kernel ESP" if kernel_esp else "kernel-libipsec"
        self.layer = "kernel" if kernel_esp else "userspace"
        psk = base64.b64encode(secrets.token_bytes(32)).decode()
        # kernel-libipsec must come before kernel-netlink, so that it, not the kernel, gets the SAs
        load = LOAD.format(kernel="kernel-netlink" if kernel_esp
                           else "kernel-libipsec kernel-netlink")
        if not self.accel:
            # strongSwan's own C plugins (aes, gcm, chapoly …) instead of OpenSSL's; OpenSSL is
            # switched off too
            load = load.replace("openssl ", "")
            self.params["plugins"] = "no openssl plugin, OPENSSL_ia32cap off"
        self.vici = {}
        for end, peer in (("a", "b"), ("b", "a")):
            d = self.dir / end
            d.mkdir()
            me, other = getattr(link, f"{end}_addr"), getattr(link, f"{peer}_addr")
            self.vici[end] = f"unix://{d}/charon.vici"
            (d / "strongswan.conf").write_text(
                "charon-systemd {\n  load = " + load + "\n  install_routes = yes\n  plugins {\n"
                f"    vici {{ socket = {self.vici[end]} }}\n    kernel-libipsec {{ allow_peer_ts = "
                "yes }\n  }\n  filelog { stderr { default = 1 ike = 1 cfg = 1 } }\n  "
                "journal { default = -1 }\n}\n")
            conf = (f"connections {{ cc {{ version = 2\n local_addrs = {me}\n remote_addrs = "
                    f"{other}\n proposals = aes128gcm16-prfsha256-x25519\n local {{ auth = psk\n "
                    f"id = {me} }}\n remote {{ auth = psk\n id = {other} }}\n children {{ cc {{ "
                    f"local_ts = {INNER[end]}/32\n remote_ts = {INNER[peer]}/32\n esp_proposals = "
                    f"{self.params['esp']}\n start_action = none }} }} }} }}\n")
            secret = (f"secrets {{ ike-cc {{ id-a = {link.a_addr}\n id-b = {link.b_addr}\n secret "
                      f"= 0s{psk} }} }}\n")
            held = res.secret_file(secret.encode(),
                                   name=f"ipsec-{end}-{secrets.token_hex(3)}.conf")
            (d / "swanctl.conf").write_text(f"{conf}include {held}\n")
            env = {"STRONGSWAN_CONF": str(d / "strongswan.conf")}
            daemon = self.start(res, end, ["charon-systemd"], name=f"charon-{end}", env=env,
                                logdir=self.dir)
            proc.wait_for(lambda d=d: (d / "charon.vici").exists(), timeout=30, daemon=daemon,
                          what="charon's VICI socket")
            if not kernel_esp:
                proc.wait_for(lambda e=end: link.has_iface(e, "ipsec0"), timeout=20, daemon=daemon,
                              what="kernel-libipsec's TUN device")
            dev = "lo" if kernel_esp else "ipsec0"
            proc.run(link.argv(end, ["ip", "addr", "add", f"{INNER[end]}/32", "dev", dev]),
                     timeout=30)
            proc.run(link.argv(end, ["ip", "link", "set", dev, "up"]), timeout=30)
            proc.run(["swanctl", "--load-all", "--noprompt", "--file", str(d / "swanctl.conf"),
                      "--uri", self.vici[end]], env=env, timeout=60)
        done = proc.run(["swanctl", "--initiate", "--child", "cc", "--timeout", "30", "--uri",
                         self.vici["a"]],
                        timeout=60, check=False)
        if done.returncode != 0:
            raise CryptcostError("IKE negotiation failed: "
                                 f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}")
        return Endpoint(INNER["b"], service)

    def verify(self, res: Resources) -> dict:
        """The CHILD_SA's mode and ESP proposal, from swanctl, with bytes counted both ways."""
        text = proc.run(["swanctl", "--list-sas", "--uri", self.vici["a"]], timeout=30).stdout
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
        if self.variant in WEAK:
            self.params["warning"] = WEAK[self.variant]
        return self.negotiated

