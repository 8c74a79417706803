"""``tcrypt``: a TrueCrypt container (R1, R3) created with tcplay and opened
by the kernel's dm-crypt through ``cryptsetup open --type tcrypt``.

TrueCrypt's format is XTS over 512-byte sectors, with cipher cascades
(one dm-crypt mapping per cipher). The passphrase is random, fed on stdin
(neither tool puts it in argv), and the mapping is read back from
``cryptsetup status`` and ``tcryptDump``.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.media import Backing
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import StorageStack, make_fs
from cryptcost.stacks.luks import DMSETUP, open_mapping, table_cipher

TCPLAY = Tool("tcplay", "tcplay", "tcplay", ("tcplay", "-v"))

VARIANTS = {
    "aes-xts": {"chain": "AES-256-XTS", "prf": "SHA512"},
    "serpent-xts": {"chain": "SERPENT-256-XTS", "prf": "SHA512"},
    "twofish-xts": {"chain": "TWOFISH-256-XTS", "prf": "SHA512"},
    "aes-twofish-serpent": {"chain": "AES-256-XTS,TWOFISH-256-XTS,SERPENT-256-XTS",
                            "prf": "SHA512"},
}


class Tcrypt(StorageStack):
    name = "tcrypt"
    description = "a TrueCrypt container (tcplay), opened by dm-crypt via cryptsetup --type tcrypt"
    crypto_library = "kernel"
    layer = "kernel"
    file_cache_only = True
    baselines = ("dm-null", "plain")          # the twin: dm-crypt without a cipher
    use_case = "whole-disk"
    tools = (TCPLAY, "cryptsetup", DMSETUP, "mkfs.ext4")
    features = ("loop", "dm-crypt")
    honours_direct = True
    variants = VARIANTS
    default_variants = ("aes-xts",)
    security = ("a TrueCrypt container hides everything inside it, like LUKS; its header format is "
                "frozen since 2014 (TrueCrypt is discontinued; VeraCrypt continues it)",)
    advice = ("for a new volume, LUKS2 does the same with a maintained format; tcrypt matters for "
              "existing containers")

    def cipher_ref(self) -> dict | None:
        return ref("aes-256-xts", "kernel", 512) if self.params["chain"] == "AES-256-XTS" else None

    def setup(self, res: Resources, backing: Backing) -> Path:
        p = self.params
        _, passphrase = res.keyfile(24, text=True, name="tcrypt")
        typed = passphrase + b"\n"
        # tcplay reads each answer on its own: passphrase, again, and "y" to create
        proc.run(["tcplay", "-c", "-d", backing.device, "-b", p["chain"], "-a", p["prf"], "-z",
                  "-w"],
                 input=[typed, typed, b"y\n"], timeout=300, secrets=[passphrase.decode()])
        name = f"cc-tcrypt-{secrets.token_hex(4)}"
        # Named, the header's hash is the only key derivation tried: unnamed, cryptsetup tries every
        # TrueCrypt and VeraCrypt variant (VeraCrypt's at 500,000 PBKDF2 rounds), a minute under
        # TCG.
        device = open_mapping(res, ["open", "--type", "tcrypt", "--disable-veracrypt", "--hash",
                                    p["prf"].lower(),
                                    backing.device, name], name, passphrase=passphrase)
        self.params["verified"] = self.read_back(name)
        mnt = make_fs(res, device, self.fs)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir

    def read_back(self, name: str) -> dict:
        """The mapping's type (``cryptsetup status``) and cipher (``dmsetup
        table``; a cascade is a chain of mappings, the top one shows one cipher)."""
        status = proc.run(["cryptsetup", "status", name], timeout=30).stdout
        mode = re.search(r"type:\s*(\S+)", status)
        cipher = table_cipher(name)
        want = [c.split("-")[0].lower() for c in self.params["chain"].split(",")]
        got = {"type": mode.group(1) if mode else None, "cipher": cipher,
               "from": "cryptsetup status, dmsetup table"}
        if (got["type"] != "TCRYPT" or not got["cipher"]
                or not any(got["cipher"].startswith(w) for w in want)):
            raise CryptcostError(f"{self.label}: the mapping is {got}, not a TCRYPT "
                                 f"{self.params['chain']}")
        return got
