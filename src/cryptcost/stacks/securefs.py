"""``securefs``: a FUSE overlay (format 4 "lite": one encrypted file per
file, like gocryptfs; "full": format 2, a B-tree per directory)."""

from __future__ import annotations

from cryptcost import proc
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack


class Securefs(FuseStack):
    name = "securefs"
    description = "securefs FUSE overlay (AES-GCM per 4 KiB block)"
    crypto_library = "crypto++"
    # securefs 0.13 mounts with big_writes (and atomic_o_trunc)
    fuse_options = ("big_writes",)
    baselines = ("fuse-passthrough:big-writes", "plain")
    # no more than the block an open file is at (a stack test checks)
    daemon_caches = False
    tools = (Tool("securefs", "securefs", "securefs", ()),)      # prints no version of its own
    variants = {"lite": {"format": 4}, "full": {"format": 2}}
    default_variants = ("lite",)
    security = ("securefs lite leaves file sizes and the directory structure visible; "
                "full format hides the structure",)

    def cipher_ref(self) -> dict:
        return ref("aes-256-gcm", "userspace")

    def init(self, res: Resources) -> None:
        # One round of argon2id: the key is 32 random bytes, not a password to stretch, and each
        # cache reset remounts, and its automatic rounds cost seconds per mount.
        # The data path (AES-GCM with the master key) is the same either way.
        self.keyfile, _ = res.keyfile(32)
        proc.run(["securefs", "create", "--format", str(self.params["format"]), "--rounds", "1",
                  "--keyfile",
                  str(self.keyfile), str(self.lower)], env=self.env(), timeout=120)

    def mount_argv(self, res: Resources) -> list[str]:
        return ["securefs", "mount", "--keyfile", str(self.keyfile), str(self.lower), str(self.mnt)]
