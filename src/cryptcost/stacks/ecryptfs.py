"""``ecryptfs``: eCryptfs, the kernel's stacked per-file encryption (R1, R3),
mounted over a directory of an ext4 filesystem on the medium.

``mount.ecryptfs`` (ecryptfs-utils) turns a random passphrase, read from a
0600 file on the key tmpfs, into an authentication token in root's user
keyring; the token is journalled and unlinked at release. What the
kernel really mounted (cipher, key size, signature) is read back from
/proc/mounts, and a written pattern must not appear in the lower file.

eCryptfs has no O_DIRECT path of its own: it is measured with fsync and
dropped caches, as fscrypt is.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.media import Backing
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import StorageStack, make_fs

MOUNT_ECRYPTFS = Tool("mount.ecryptfs", "mount.ecryptfs", "ecryptfs-utils", ())
KEYCTL = "keyctl"
PATTERN = b"cryptcost-ecryptfs-plaintext-check " * 64


@releaser("ecryptfs-key")
def release_key(data: dict) -> None:
    """Unlink the authentication token mount.ecryptfs put in root's user keyring."""
    sig = data.get("sig")
    if not sig:
        return
    found = proc.run(["keyctl", "search", "@u", "user", sig], check=False, timeout=30)
    if found.returncode == 0 and found.stdout.strip():
        proc.run(["keyctl", "unlink", found.stdout.strip(), "@u"], check=False, timeout=30)


def mount_options(mountpoint: Path) -> dict[str, str]:
    """The options /proc/mounts shows for an eCryptfs mount."""
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == str(mountpoint) and parts[2] == "ecryptfs":
            return dict(o.split("=", 1) if "=" in o else (o, "") for o in parts[3].split(","))
    return {}


class Ecryptfs(StorageStack):
    name = "ecryptfs"
    description = "eCryptfs: the kernel's stacked per-file encryption over a directory"
    crypto_library = "kernel"
    layer = "kernel"
    baselines = ("plain",)
    use_case = "per-directory"
    tools = (MOUNT_ECRYPTFS, KEYCTL, "mkfs.ext4")
    features = ("loop", "ecryptfs")
    filesystems = ("ext4",)
    honours_direct = False
    variants = {
        "aes-128": {"cipher": "aes", "key_bytes": 16},
        "aes-256": {"cipher": "aes", "key_bytes": 32},
    }
    default_variants = ("aes-128",)
    security = ("eCryptfs encrypts each file's contents (AES-CBC, one IV per 4 KiB extent); here "
                "names, sizes, timestamps, permissions and the tree stay visible",
                "eCryptfs is unmaintained upstream and deprecated: prefer fscrypt for new systems")
    advice = "eCryptfs is deprecated: fscrypt covers the same per-directory use in the kernel"

    def cipher_ref(self) -> dict | None:
        return ref(f"aes-{self.params['key_bytes'] * 8}-cbc", "kernel", 4096)

    def setup(self, res: Resources, backing: Backing) -> Path:
        p = self.params
        root = make_fs(res, backing.device, "ext4")
        self.lower = root / "lower"
        self.lower.mkdir()
        mnt = res.tmpdir("cryptcost-ecryptfs-")
        pwfile = res.secret_file(f"passphrase_passwd={secrets.token_hex(32)}\n".encode(),
                                 name="ecryptfs")
        key = res.journal.add("ecryptfs-key", sig="")
        options = ",".join([f"key=passphrase:passphrase_passwd_file={pwfile}",
                            f"ecryptfs_cipher={p['cipher']}",
                            f"ecryptfs_key_bytes={p['key_bytes']}", "ecryptfs_passthrough=n",
                            "ecryptfs_enable_filename_crypto=n", "no_sig_cache", "verbosity=0"])
        res.mount(str(self.lower), mnt, "ecryptfs", options)
        seen = mount_options(mnt)
        res.journal.update(key, sig=seen.get("ecryptfs_sig", ""))
        self.params["verified"] = self.read_back(seen, mnt)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir

    def read_back(self, seen: dict, mnt: Path) -> dict:
        """The mounted cipher and key size, and a pattern absent from the lower file."""
        p = self.params
        got = {"cipher": seen.get("ecryptfs_cipher"),
               "key_bytes": int(seen.get("ecryptfs_key_bytes", "0") or 0),
               "sig": bool(seen.get("ecryptfs_sig")), "from": "/proc/mounts"}
        if (got["cipher"], got["key_bytes"]) != (p["cipher"], p["key_bytes"]) or not got["sig"]:
            raise CryptcostError(f"{self.label}: eCryptfs mounted {got}, not {p['cipher']} with "
                                 f"{p['key_bytes']}-byte keys")
        probe = mnt / "cc-probe"
        probe.write_bytes(PATTERN)
        with open(probe, "rb+") as fh:
            os.fsync(fh.fileno())
        lower = (self.lower / "cc-probe").read_bytes()
        probe.unlink()
        if PATTERN[:64] in lower:
            raise CryptcostError(f"{self.label}: the lower file holds the plaintext")
        got["lower_file"] = "ciphertext"
        return got
