"""``dm-null``: dm-crypt with the null cipher (``capi:ecb(cipher_null)``) —
the cost of the dm-crypt machinery (bio splitting, workqueues) without any
encryption, between ``plain`` and ``luks``."""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptcost.media import Backing
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.fs import StorageStack, make_fs
from cryptcost.stacks.luks import DMSETUP, open_mapping


class DmNull(StorageStack):
    name = "dm-null"
    description = "dm-crypt with the null cipher: dm-crypt's cost without crypto"
    layer = "kernel"
    file_cache_only = True
    role = "baseline"
    baselines = ("plain",)
    isolates = "device-mapper and dm-crypt's own work (bio splitting, workqueues), no cipher"
    tools = (DMSETUP, "mkfs.ext4")
    features = ("dm-crypt",)
    honours_direct = True
    variants = {"default": {"table_cipher": "capi:ecb(cipher_null)-plain", "key": "-"}}

    def setup(self, res: Resources, backing: Backing) -> Path:
        sectors = backing.size // 512
        name = f"cc-null-{secrets.token_hex(4)}"
        table = f"0 {sectors} crypt {self.params['table_cipher']} - 0 {backing.device} 0"
        device = open_mapping(res, ["create", name, "--table", table], name, via="dmsetup")
        mnt = make_fs(res, device, self.fs)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir
