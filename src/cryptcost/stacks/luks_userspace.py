"""``luks-userspace``: QEMU's own LUKS implementation, no dm-crypt needed.

qemu-img writes a LUKS header on the device (the same on-disk format as
cryptsetup — checked with ``cryptsetup luksDump``), qemu-storage-daemon
decrypts it in user space and exports it through FUSE; a loop device and a
filesystem go on top (see :mod:`cryptcost.stacks.qemu_export`).
"""

from __future__ import annotations

import re
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.media import Backing
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.qemu_export import QEMU_IMG, QSD, QemuExportStack, cipher_backend, qemu_run


def _cipher(alg: str, mode: str, ivgen: str, ivhash: str | None = None,
            warning: str | None = None) -> dict:
    d = {"cipher_alg": alg, "cipher_mode": mode, "ivgen_alg": ivgen}
    if ivhash:
        d["ivgen_hash_alg"] = ivhash
    if warning:
        d["warning"] = warning
    return d


HEADER_ROOM = 4 << 20
_ECB = "ECB leaks patterns: identical plaintext blocks give identical ciphertext"

VARIANTS = {
    "aes-256-xts-plain64": _cipher("aes-256", "xts", "plain64"),
    "aes-128-xts-plain64": _cipher("aes-128", "xts", "plain64"),
    "aes-256-cbc-essiv": _cipher("aes-256", "cbc", "essiv", "sha256"),
    "aes-128-cbc-essiv": _cipher("aes-128", "cbc", "essiv", "sha256"),
    "aes-256-cbc-plain64": _cipher("aes-256", "cbc", "plain64"),
    "aes-256-ecb": _cipher("aes-256", "ecb", "plain64", warning=_ECB),
    "twofish-256-xts-plain64": _cipher("twofish-256", "xts", "plain64"),
    "serpent-256-xts-plain64": _cipher("serpent-256", "xts", "plain64"),
}


# The header's PBKDF2 hash. qemu-img times 32768 iterations before it picks a count, in whole ms
# of thread CPU, and fails ("Unable to get accurate CPU usage") when it reads 0 (fixed in QEMU
# 9.2.1). With SHA-256 that took under a millisecond here often enough to fail 24 of 40 creates,
# and eight tries in a row once; SHA-512's (about 2× slower per iteration, no SHA extension) failed
# none of 40. It costs nothing measured: the PBKDF runs once, when the image is opened.
PBKDF_HASH = "sha512"


def parse_luks_dump(text: str) -> dict:
    """Version, cipher name and mode, key bits and PBKDF hash from ``cryptsetup luksDump``."""
    def field(name: str) -> str | None:
        m = re.search(rf"^{name}:\s*(.+)$", text, re.M)
        return m.group(1).strip() if m else None
    return {"version": field("Version"), "cipher": field("Cipher name"),
            "mode": field("Cipher mode"), "key_bits": field("MK bits"), "hash": field("Hash spec")}


class LuksUserspace(QemuExportStack):
    name = "luks-userspace"
    description = "LUKS1 decrypted by qemu-storage-daemon, exported via FUSE + loop + filesystem"
    # Debian's qemu: ciphers from Nettle (GnuTLS is linked for TLS only)
    crypto_library = "nettle"
    baselines = ("qemu-raw", "plain")
    use_case = "whole-disk"
    tools = (QSD, QEMU_IMG, "mkfs.ext4")
    variants = VARIANTS
    default_variants = ("aes-256-xts-plain64",)
    security = ("LUKS encrypts the whole device: file names, sizes and metadata are hidden",
                "qemu writes LUKS1 headers (cryptsetup's default is LUKS2)")

    def accel_switch(self) -> str | None:
        """Nettle's switch counts only if this qemu-storage-daemon's ciphers are Nettle's."""
        found = cipher_backend(proc.which("qemu-storage-daemon"))
        if found != self.crypto_library:
            return ("acceleration cannot be switched off here: qemu-storage-daemon's ciphers come "
                    f"from {found or 'no library cryptcost recognises (QEMU built-in code)'}, not "
                    f"{self.crypto_library}")
        return super().accel_switch()

    def cipher_ref(self) -> dict | None:
        alg, mode = self.params["cipher_alg"], self.params["cipher_mode"]
        if not alg.startswith("aes-"):
            return None
        return ref(f"{alg}-{mode}", "userspace", 512)

    def prepare(self, res: Resources, backing: Backing, workdir: Path) -> list[str]:
        keyfile, _ = res.keyfile(32, text=True)        # a passphrase: qemu wants UTF-8
        opts = ["key-secret=sec0", f"cipher-alg={self.params['cipher_alg']}",
                f"cipher-mode={self.params['cipher_mode']}",
                f"ivgen-alg={self.params['ivgen_alg']}",
                f"hash-alg={PBKDF_HASH}", "iter-time=10"]
        if "ivgen_hash_alg" in self.params:
            opts.append(f"ivgen-hash-alg={self.params['ivgen_hash_alg']}")
        # The size is the decrypted payload's; the header (≈2 MiB for LUKS1) needs room on top.
        payload = (backing.size - HEADER_ROOM) // (1 << 20) * (1 << 20)
        qemu_run(["qemu-img", "create", "-f", "luks", "--object", f"secret,id=sec0,file={keyfile}",
                  "-o", ",".join(opts), backing.device, str(payload)])
        self.header = self._verify_header(backing.device)
        return ["--object", f"secret,id=sec0,file={keyfile}",
                "--blockdev", "driver=luks,node-name=fmt0,file=file0,key-secret=sec0"]

    def _verify_header(self, device: str) -> dict:
        """The header qemu wrote, as cryptsetup reads it; it must match the variant."""
        if not proc.which("cryptsetup"):
            return {"checked": False, "why": "cryptsetup not installed"}
        header = parse_luks_dump(proc.run(["cryptsetup", "luksDump", device], timeout=30).stdout)
        alg = self.params["cipher_alg"].split("-")[0]
        if header["cipher"] != alg or not (header["mode"]
                                           or "").startswith(self.params["cipher_mode"]):
            raise CryptcostError("luks-userspace: header says "
                                 f"{header['cipher']}-{header['mode']}, expected "
                                 f"{self.params['cipher_alg']}-{self.params['cipher_mode']}")
        return {"checked": True, **header}

    def describe(self) -> dict:
        d = super().describe()
        d["luks_header"] = getattr(self, "header", None)
        d["pbkdf_iter_time_ms"] = 10
        d["pbkdf_hash"] = PBKDF_HASH
        d["cipher_backend"] = cipher_backend(proc.which("qemu-storage-daemon"))
        return d
