"""``luks``: dm-crypt through cryptsetup — LUKS2 or plain mode, with the
cipher spec, key size, sector size and ``--perf-*`` flags as variants
(the tuning a recommendation reports as measured), and a ``generic``
variant forcing the kernel's software AES via a ``capi:`` spec (rule 14).
An AES-XTS variant's acceleration-off copy (``--accel on,off``) is the same
mapping through that ``capi:`` spec: the kernel's C AES in place of its
AES-NI driver, paired with the variant and verified by its speed like any
library's switch.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.media import Backing
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import StorageStack, make_fs

DMSETUP = Tool("dmsetup", "dmsetup", "dmsetup", ("dmsetup", "--version"))

_ECB = "ECB leaks patterns: identical plaintext blocks give identical ciphertext"
_LRW = "LRW is deprecated (superseded by XTS)"


def _spec(cipher: str, key: int, sector: int = 512, mode: str = "luks2", perf: tuple = (),
       warning: str | None = None) -> dict:
    d = {"type": mode, "cipher": cipher, "key_size": key, "sector_size": sector, "perf": list(perf)}
    if warning:
        d["warning"] = warning
    return d


NOQ = ("--perf-no_read_workqueue", "--perf-no_write_workqueue")
VARIANTS = {
    "aes-xts-plain64": _spec("aes-xts-plain64", 512),
    "aes-xts-plain64-4k": _spec("aes-xts-plain64", 512, 4096),
    "aes-xts-plain64-4k-noqueue": _spec("aes-xts-plain64", 512, 4096, perf=NOQ),
    # each dm-crypt perf flag alone, for its own measured tuning delta
    "aes-xts-plain64-4k-no-read-wq": _spec("aes-xts-plain64", 512, 4096, perf=NOQ[:1]),
    "aes-xts-plain64-4k-no-write-wq": _spec("aes-xts-plain64", 512, 4096, perf=NOQ[1:]),
    "aes-xts-plain64-4k-same-cpu": _spec("aes-xts-plain64", 512, 4096,
                                         perf=("--perf-same_cpu_crypt",)),
    "aes-xts-plain64-4k-submit-from-crypt-cpus": _spec("aes-xts-plain64", 512, 4096,
                                                       perf=("--perf-submit_from_crypt_cpus",)),
    "aes-128-xts-plain64": _spec("aes-xts-plain64", 256),
    "aes-cbc-essiv": _spec("aes-cbc-essiv:sha256", 256),
    "aes-ecb": _spec("aes-ecb", 256, warning=_ECB),
    "aes-lrw-benbi": _spec("aes-lrw-benbi", 384, warning=_LRW),
    "twofish-xts-plain64": _spec("twofish-xts-plain64", 512),
    "twofish-cbc-essiv": _spec("twofish-cbc-essiv:sha256", 256),
    "twofish-lrw-benbi": _spec("twofish-lrw-benbi", 384, warning=_LRW),
    "serpent-xts-plain64": _spec("serpent-xts-plain64", 512),
    "adiantum": _spec("xchacha12,aes-adiantum-plain64", 256),
    "plain-aes-xts-plain64": _spec("aes-xts-plain64", 512, mode="plain"),
    "generic-aes-xts": _spec("capi:xts(ecb(aes-generic))-plain64", 512, mode="plain"),
}


# The kernel's acceleration switch, per cipher spec: the same mode over its generic C AES.
GENERIC = {"aes-xts-plain64": "capi:xts(ecb(aes-generic))-plain64"}


@releaser("dm")
def release_dm(data: dict) -> None:
    name = data["name"]
    if Path(f"/dev/mapper/{name}").exists():
        proc.run(["cryptsetup", "close", name], check=False, timeout=60)
        if Path(f"/dev/mapper/{name}").exists():
            proc.run(["dmsetup", "remove", "--retry", name], check=False, timeout=60)


def open_mapping(res: Resources, argv_tail: list[str], name: str, via: str = "cryptsetup",
                 passphrase: bytes | None = None) -> str:
    """Journal, then create, a device-mapper mapping; return its device path.
    ``passphrase`` goes to stdin, never to a log. Where no udev runs (a
    container, ``cryptcost vm``'s guest), dmsetup makes no /dev/mapper node
    by itself: ``dmsetup mknodes`` does."""
    hidden = [passphrase.decode()] if passphrase else []
    res.track("dm", lambda e: proc.run([via] + argv_tail, timeout=300, secrets=hidden,
                                       input=passphrase + b"\n" if passphrase else None), name=name)
    device = f"/dev/mapper/{name}"
    if not Path(device).exists():
        proc.run(["dmsetup", "mknodes", name], timeout=60)
    return device


def table_cipher(name: str) -> str | None:
    """The cipher field of a crypt mapping's table, as given to the kernel (a
    ``capi:`` spec too, which ``cryptsetup status`` rewrites). Only that
    field is kept: dmsetup masks the key, and the rest is not read."""
    fields = proc.run(["dmsetup", "table", name], timeout=30).stdout.split()
    return fields[3] if len(fields) > 3 and fields[2] == "crypt" else None


class Luks(StorageStack):
    name = "luks"
    description = "dm-crypt via cryptsetup (LUKS2 or plain), in the kernel"
    crypto_library = "kernel"
    layer = "kernel"
    file_cache_only = True
    # the twin: dm-crypt's own work without a cipher, between the plain filesystem and this
    baselines = ("dm-null", "plain")
    use_case = "whole-disk"
    tools = ("cryptsetup", DMSETUP, "mkfs.ext4")
    features = ("dm-crypt",)
    honours_direct = True
    variants = VARIANTS
    default_variants = ("aes-xts-plain64", "aes-xts-plain64-4k")
    security = ("LUKS/dm-crypt encrypts the whole device: names, sizes and metadata are hidden",)
    advice = ("on a host with dm-crypt, LUKS2 aes-xts-plain64 with 4096-byte sectors is the "
              "usual choice")

    def accel_switch(self) -> str | None:
        """AES-XTS can run through the kernel's generic C AES (a ``capi:`` spec); other
        ciphers have no such twin here."""
        if self.params["cipher"] in GENERIC:
            return None
        return (f"{self.params['cipher']} has no software-only twin here (the kernel's generic "
                f"AES is switched in for {', '.join(GENERIC)} only)")

    def accel_env(self) -> dict[str, str]:
        return {}               # the switch is the mapping's cipher spec, not an environment

    def direct_unit(self) -> int:
        return self.params["sector_size"]

    def cipher_ref(self) -> dict | None:
        spec, bits = self.params["cipher"], self.params["key_size"]
        if spec.startswith("aes-xts"):
            return ref(f"aes-{bits // 2}-xts", "kernel", self.params["sector_size"])
        if spec.startswith("aes-cbc") or spec.startswith("aes-ecb"):
            return ref(f"aes-{bits}-{spec.split('-')[1]}", "kernel", self.params["sector_size"])
        return None

    def read_back(self, device: str, name: str) -> dict:
        """What the kernel and the header really hold — cipher, key size,
        sector size, perf flags — from ``cryptsetup status`` (and, for
        LUKS2, ``luksDump``); a mismatch with the variant fails the setup."""
        p = self.params
        status = proc.run(["cryptsetup", "status", name], timeout=30).stdout
        got = {k.strip(): v.strip() for k, v in
               (line.split(":", 1) for line in status.splitlines() if ":" in line)}
        seen = {"cipher": table_cipher(name),
                "key_size": int(got.get("keysize", "0").split()[0] or 0),
                "sector_size": int(got.get("sector size", "512").split()[0]),
                "flags": sorted(got.get("flags", "").split()),
                "from": "dmsetup table, cryptsetup status"}
        if p["type"] == "luks2":
            dump = proc.run(["cryptsetup", "luksDump", device], timeout=30).stdout
            version = re.search(r"^Version:\s*(\d+)", dump, re.M)
            header_cipher = re.search(r"^\s*cipher:\s*(\S+)", dump, re.M)
            seen["header"] = {"version": int(version.group(1)) if version else None,
                              "cipher": header_cipher.group(1) if header_cipher else None}
            seen["from"] += ", cryptsetup luksDump"
            if seen["header"]["version"] != 2 or seen["header"]["cipher"] != p["cipher"]:
                raise CryptcostError(f"{self.label}: the LUKS header holds {seen['header']}, "
                                     f"not LUKS2 with {p['cipher']}")
        want_flags = sorted(f.removeprefix("--perf-") for f in p["perf"])
        expect = {"cipher": p["cipher"], "key_size": p["key_size"], "sector_size": p["sector_size"]}
        wrong = {k: (seen[k], v) for k, v in expect.items() if seen[k] != v}
        if not set(want_flags) <= set(seen["flags"]):
            wrong["flags"] = (seen["flags"], want_flags)
        if wrong:
            raise CryptcostError(f"{self.label}: the mapping is not what was asked for: "
                                 + ", ".join(f"{k} {a} instead of {b}"
                                             for k, (a, b) in wrong.items()))
        return seen

    def setup(self, res: Resources, backing: Backing) -> Path:
        p = self.params
        if not self.accel:
            p["accel_switch"] = f"{p['cipher']} as {GENERIC[p['cipher']]}: the kernel's C AES"
            p["cipher"] = GENERIC[p["cipher"]]
        keyfile, _ = res.keyfile(p["key_size"] // 8 if p["type"] == "plain" else 64)
        name = f"cc-luks-{secrets.token_hex(4)}"
        common = ["--cipher", p["cipher"], "--key-size", str(p["key_size"]), "--key-file",
                  str(keyfile)]
        if p["type"] == "luks2":
            proc.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", *common, "--sector-size",
                      str(p["sector_size"]), "--pbkdf", "pbkdf2", "--pbkdf-force-iterations",
                      "1000",
                      backing.device], timeout=120)
            tail = ["open", "--key-file", str(keyfile), *p["perf"], backing.device, name]
        else:
            tail = ["open", "--type", "plain", *common, "--sector-size", str(p["sector_size"]),
                    *p["perf"], backing.device, name]
        device = open_mapping(res, tail, name)
        self.params["verified"] = self.read_back(backing.device, name)
        mnt = make_fs(res, device, self.fs)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir
