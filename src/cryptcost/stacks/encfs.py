"""``encfs``: the historical FUSE overlay (R1 names it). ``standard``:
AES-192, 1 KiB blocks; ``paranoia``: AES-256 with per-block MACs and
per-file IVs chained to the path."""

from __future__ import annotations

from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack


class Encfs(FuseStack):
    name = "encfs"
    description = "EncFS FUSE overlay (historical)"
    crypto_library = "openssl"
    tools = (Tool("encfs", "encfs", "encfs", ("encfs", "--version")),)
    variants = {"standard": {"mode": "--standard", "cipher": "AES-192, 1 KiB blocks"},
                "paranoia": {"mode": "--paranoia", "cipher": "AES-256, 1 KiB blocks, block MACs"}}
    default_variants = ("standard",)
    daemon_caches = False            # one block per open file, dropped at release

    def cipher_ref(self) -> dict:
        # standard mode is AES-192-CBC, which the engines do not measure: AES-256-CBC is near it
        return ref("aes-256-cbc", "userspace", 1024, exact=self.variant == "paranoia")
    security = ("EncFS has known weaknesses (2014 audit: watermarking, weak MACs in standard mode) "
                "and leaves sizes and structure visible: prefer gocryptfs",)

    def init(self, res: Resources) -> None:
        self.passfile, _ = res.keyfile(32, text=True)

    def mount_argv(self, res: Resources) -> list[str]:
        # The first mount creates the volume non-interactively; later mounts
        # read .encfs6.xml and ignore the mode flag.
        return ["encfs", "-f", self.params["mode"], f"--extpass=cat {self.passfile}",
                str(self.lower), str(self.mnt)]
