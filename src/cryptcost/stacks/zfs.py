"""``zfs``: native ZFS encryption (aes-256-gcm, aes-256-ccm) with
compression off — ZFS compresses before it encrypts, which would flatter
it (rule 3) — against an unencrypted pool on the same medium (``zfs:off``).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptcost import proc
from cryptcost.media import Backing
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import StorageStack


@releaser("zpool")
def release_zpool(data: dict) -> None:
    pool = data["pool"]
    if proc.run(["zpool", "list", "-H", pool], check=False, timeout=60).returncode == 0:
        proc.run(["zpool", "destroy", "-f", pool], check=False, timeout=120)


class Zfs(StorageStack):
    name = "zfs"
    description = "ZFS dataset with native encryption (compression off)"
    crypto_library = "kernel"
    layer = "kernel"
    baselines = ("zfs:off",)
    baseline_variants = ("off",)
    use_case = "whole-disk"
    tools = (Tool("zfs", "zfs", "zfsutils-linux (contrib, with zfs-dkms)", ("zfs", "version")),)
    features = ("zfs",)
    filesystems = ("zfs",)
    variants = {"aes-256-gcm": {"encryption": "aes-256-gcm"},
                "aes-256-ccm": {"encryption": "aes-256-ccm"},
                "off": {"encryption": "off"}}
    default_variants = ("aes-256-gcm",)

    def cipher_ref(self) -> dict | None:
        enc = self.params["encryption"]
        return ref("aes-256-gcm", "kernel", 131072) if enc == "aes-256-gcm" else None
    security = ("ZFS native encryption leaves dataset names, sizes and some metadata visible",)

    def __init__(self, variant: str | None = None, fs: str = "zfs"):
        super().__init__(variant, "zfs")

    def setup(self, res: Resources, backing: Backing) -> Path:
        if not Path("/sys/module/zfs").exists():        # built by DKMS, not loaded at boot
            proc.run(["modprobe", "zfs"], timeout=120)
        pool = f"cc-{secrets.token_hex(4)}"
        mnt = res.tmpdir("cryptcost-zfs-")
        opts = ["-O", "compression=off", "-O", "atime=off", "-O", f"mountpoint={mnt}"]
        if self.params["encryption"] != "off":
            keyfile, _ = res.keyfile(32)
            opts += ["-O", f"encryption={self.params['encryption']}", "-O", "keyformat=raw",
                     "-O", f"keylocation=file://{keyfile}"]
        res.track("zpool", lambda e: proc.run(["zpool", "create", "-f", "-o", "ashift=12", *opts,
                                              pool, backing.device], timeout=300), pool=pool)
        self.params["verified"] = self.read_back(pool)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir

    def read_back(self, pool: str) -> dict:
        """The pool's dataset as ZFS reports it: its encryption, key status and compression
        (``zfs get``), each held to what was asked."""
        got = proc.run(["zfs", "get", "-H", "-o", "property,value",
                        "encryption,keystatus,keyformat,compression", pool], timeout=60).stdout
        seen = dict(line.split("\t", 1) for line in got.strip().splitlines() if "\t" in line)
        self.expect("ZFS encryption", seen.get("encryption"), self.params["encryption"])
        self.expect("ZFS compression", seen.get("compression"), "off")
        if self.params["encryption"] != "off":
            self.expect("ZFS key status", seen.get("keystatus"), "available")
        return {**seen, "from": "zfs get"}
