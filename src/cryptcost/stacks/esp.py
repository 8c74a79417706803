"""``esp``: manually keyed ESP between the link's ends, as R5 keyed it (``setkey``; here ``ip
xfrm``): no IKE daemon, the two SAs and the policies written into each end's kernel from a batch
file on that end's key tmpfs, so that no key is ever on a command line. Its variants are R5's
rows an IKE daemon does not negotiate: encryption without authentication, and null/null, which
neither encrypts nor authenticates. Tunnel mode between inner addresses, as the ``ipsec`` stack
runs it.

Kernel ESP only (kernel-libipsec, the userspace fallback, takes its SAs from strongSwan), on a
netns link, whose namespaces take the SAs and policies with them when they are deleted.
:meth:`verify` reads the SAs back (their keys masked at the end that holds them) with the
bytes each carried.
"""

from __future__ import annotations

import re
import secrets

from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack, xfrm_states

_UNAUTHENTICATED = ("encryption without authentication: confidential, but a forger can flip "
                    "bits of the plaintext unseen")
_64BIT = "64-bit blocks, obsolete"
# variant → (the kernel's algorithm, key bytes, the cipher table's nearest algorithm or None,
# its weakness)
ALGORITHMS = {
    "null-null": ("ecb(cipher_null)", 0, None,
                  "null encryption and no authentication: neither confidential nor authenticated"),
    "des": ("cbc(des)", 8, None, f"DES: a 56-bit key and {_64BIT}; {_UNAUTHENTICATED}"),
    "3des": ("cbc(des3_ede)", 24, "des-ede3-cbc", f"3DES: {_64BIT}; {_UNAUTHENTICATED}"),
    "aes-cbc": ("cbc(aes)", 16, "aes-128-cbc", _UNAUTHENTICATED),
    "aes-ctr": ("rfc3686(ctr(aes))", 20, "aes-128-ctr", _UNAUTHENTICATED),
    "blowfish": ("cbc(blowfish)", 16, "bf-cbc", f"Blowfish: {_64BIT}; {_UNAUTHENTICATED}"),
    "twofish": ("cbc(twofish)", 16, None, _UNAUTHENTICATED),
    "camellia": ("cbc(camellia)", 16, None, _UNAUTHENTICATED),
}


class Esp(NetworkStack):
    name = "esp"
    description = ("manually keyed ESP (ip xfrm, as R5's setkey): encryption without "
                   "authentication, and null/null")
    layer = "kernel"
    use_case = "site-to-site"
    suites = {"full": "*"}
    baselines = ("tcp",)
    security = ("manual keys never change: no IKE, no rekeying, no forward secrecy",
                "ESP without authentication lets anyone on the path alter packets unseen")
    tools = ()
    features = ("netns", "veth", "esp", "xfrm")
    links = ("netns",)
    exclusive = True
    transport = "ESP (IP protocol 50)"
    crypto_library = "kernel"
    variants = {name: {"enc": a[0], "key_bytes": a[1], "algorithm": a[2], "warning": a[3]}
                for name, a in ALGORITHMS.items()}
    default_variants = ("aes-cbc",)

    def confidential(self) -> bool | str:
        return self.params["warning"] if self.variant == "null-null" else True

    def cipher_ref(self) -> dict | None:
        alg = self.params["algorithm"]
        return ref(alg, "kernel", unit=1400) if alg else None

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        inner = self.inner_addresses("10.206")
        outer = {"a": link.a_addr, "b": link.b_addr}
        n = int(inner["a"].split(".")[2])
        self.spi = {"a": f"0x{0xcc000100 + n:08x}", "b": f"0x{0xcc000200 + n:08x}"}   # by sender
        enc, size = self.params["enc"], self.params["key_bytes"]
        # one key per direction, made here; each end holds both, in its key tmpfs only
        keys = {end: f"0x{secrets.token_hex(size)}" if size else '""' for end in ("a", "b")}

        def sa(frm: str, to: str) -> str:
            return (f"xfrm state add src {outer[frm]} dst {outer[to]} proto esp "
                    f"spi {self.spi[frm]} reqid 1 mode tunnel enc {enc} {keys[frm]}\n")

        def policy(frm: str, to: str, direction: str) -> str:
            return (f"xfrm policy add src {inner[frm]}/32 dst {inner[to]}/32 dir {direction} "
                    f"tmpl src {outer[frm]} dst {outer[to]} proto esp reqid 1 mode tunnel\n")
        for end, peer in (("a", "b"), ("b", "a")):
            at = link.at(end)
            batch = (sa(end, peer) + sa(peer, end) + policy(end, peer, "out")
                     + policy(peer, end, "in") + policy(peer, end, "fwd"))
            held = at.secret_file(batch.encode(), name=f"esp-{end}-{secrets.token_hex(3)}")
            at.run(["ip", "-batch", str(held)], timeout=30)
            at.address(f"{inner[end]}/32", "lo")
            at.run(["ip", "route", "add", f"{inner[peer]}/32", "dev", link.iface(end), "src",
                    inner[end]], timeout=30)
        self.params["implementation"] = "kernel ESP, keyed by hand"
        return Endpoint(inner["b"], service)

    def verify(self, res: Resources) -> dict:
        """Both SAs at end a, with the algorithm asked for, and bytes carried by each."""
        sas = xfrm_states(self.link.at("a"))
        seen = {}
        for spi in self.spi.values():
            block, moved = next(((b, n) for b, n in sas if re.search(rf"spi {spi}\b", b)),
                                (None, 0))
            if block is None:
                raise CryptcostError(f"esp: no SA with spi {spi} at end a")
            alg = re.search(r"enc (\S+)", block)
            seen[spi] = {"enc": alg.group(1) if alg else None, "bytes": moved}
        for spi, sa in seen.items():
            self.expect("ESP encryption", sa["enc"], self.params["enc"])
            if not sa["bytes"]:
                raise CryptcostError(f"esp: the SA with spi {spi} carried no traffic")
        self.negotiated = {"implementation": self.params["implementation"], "mode": "TUNNEL",
                           "esp": self.params["enc"] + ", no authentication",
                           "bytes": {spi: sa["bytes"] for spi, sa in seen.items()},
                           "from": "ip -s xfrm state (keys masked)"}
        return self.negotiated
