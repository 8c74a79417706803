"""``cryfs``: a FUSE filesystem that stores everything as fixed-size
encrypted blocks, hiding file sizes and the directory structure.

CryFS 0.11 derives its key with scrypt settings that no option lowers, so
every mount costs seconds of CPU; the daemon's CPU until its first mount
appeared is recorded as ``mount_cpu_seconds`` (a cost users pay at every
unlock). That mount runs in the background while the other stacks of a
run are set up (``mounts_in_background``), so its wall time is not the
figure. Unlike the other
FUSE stacks it is not remounted before reads: CryFS's block caches drop
an entry at most ``MAX_LIFETIME_SEC`` (1 s) after its last use
(blockstore/implementations/caching/cache/Cache.h), so dropping the
kernel's caches and leaving the daemon idle for longer than that empties
every cache a read could meet, in a fraction of a remount's 7 s. A stack
test checks that reads after this reset are no faster than after a
remount, and that an immediate re-read is (the cache is real).
"""

from __future__ import annotations

import time
from pathlib import Path

from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack, drop_caches


class Cryfs(FuseStack):
    name = "cryfs"
    description = "CryFS FUSE filesystem: encrypted fixed-size blocks (hides sizes and structure)"
    crypto_library = "crypto++"
    fuse_options = ("big_writes",)          # CryFS 0.11 adds it to every mount
    baselines = ("fuse-passthrough:big-writes", "plain")
    tools = (Tool("cryfs", "cryfs", "cryfs", ("cryfs", "--version")),)
    variants = {"aes-256-gcm": {"cipher": "aes-256-gcm"},
                "xchacha20-poly1305": {"cipher": "xchacha20-poly1305"}}
    default_variants = ("aes-256-gcm",)
    security = ("CryFS hides file sizes, metadata and the directory structure in fixed-size blocks",
                )
    mount_timeout = 600
    # scrypt: seconds on every core, overlapping the other stacks' set-up
    mounts_in_background = True
    cache_lifetime = 1.0           # CryFS's Cache::MAX_LIFETIME_SEC
    remount_seconds = 1.5          # the cache reset: an idle wait longer than that lifetime

    def cipher_ref(self) -> dict:
        # CryFS uses Crypto++; OpenSSL's speed for the same construction stands in.
        alg = {"aes-256-gcm": ("aes-256-gcm", True),
               "xchacha20-poly1305": ("chacha20-poly1305", False)}
        name, exact = alg[self.variant]
        return ref(name, "userspace", 16384, exact)

    def env(self) -> dict[str, str]:
        return {**super().env(), "CRYFS_FRONTEND": "noninteractive",
                "CRYFS_NO_UPDATE_CHECK": "true",
                "CRYFS_LOCAL_STATE_DIR": str(self.home / "cryfs-state")}

    def init(self, res: Resources) -> None:
        self.passfile, _ = res.keyfile(32, text=True)

    def stdin_file(self) -> str:
        return str(self.passfile)

    def mount_argv(self, res: Resources) -> list[str]:
        return ["cryfs", "-f", "--cipher", self.params["cipher"], "--allow-replaced-filesystem",
                str(self.lower), str(self.mnt)]

    def ready(self, res: Resources) -> Path:
        workdir = super().ready(res)
        if not hasattr(self, "mount_cpu_seconds"):
            self.mount_cpu_seconds = sum(cpu.process_cpu(self.daemon_pids()).values())
        return workdir

    resets_open_files = True           # its reset is no remount

    def reset_cache(self, res: Resources) -> str:
        """Drop the kernel's caches, then leave CryFS idle until its own caches have expired."""
        drop_caches()
        time.sleep(self.cache_lifetime * 1.5)
        return "drop_caches+idle"

    def describe(self) -> dict:
        d = super().describe()
        d["mount_cpu_seconds"] = round(getattr(self, "mount_cpu_seconds", 0.0), 1)
        return d
