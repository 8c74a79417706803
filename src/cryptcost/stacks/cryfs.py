"""``cryfs``: a FUSE filesystem that stores everything as fixed-size
encrypted blocks, hiding file sizes and the directory structure.

CryFS 0.11 derives its key with heavy scrypt settings that no option
lowers: a mount costs about a minute or two of CPU on a small machine.
So this stack mounts once, reports that mount time (``mount_seconds``),
and resets caches with drop_caches only; CryFS's own block cache survives,
which the recorded cache mode says.
"""

from __future__ import annotations

import time

from cryptcost.runner.resources import Resources
from cryptcost.stacks.base import FuseStack, drop_caches


class Cryfs(FuseStack):
    name = "cryfs"
    description = "CryFS FUSE filesystem: encrypted fixed-size blocks (hides sizes and structure)"
    tools = ("cryfs",)
    variants = {"aes-256-gcm": {"cipher": "aes-256-gcm"},
                "xchacha20-poly1305": {"cipher": "xchacha20-poly1305"}}
    default_variants = ("aes-256-gcm",)
    security = ("CryFS hides file sizes, metadata and the directory structure in fixed-size blocks",)
    mount_timeout = 600

    def env(self) -> dict[str, str]:
        return {**super().env(), "CRYFS_FRONTEND": "noninteractive", "CRYFS_NO_UPDATE_CHECK": "true",
                "CRYFS_LOCAL_STATE_DIR": str(self.home / "cryfs-state")}

    def init(self, res: Resources) -> None:
        self.passfile, _ = res.keyfile(32, text=True)

    def stdin_file(self) -> str:
        return str(self.passfile)

    def mount_argv(self, res: Resources) -> list[str]:
        return ["cryfs", "-f", "--cipher", self.params["cipher"], "--allow-replaced-filesystem",
                str(self.lower), str(self.mnt)]

    def _mount(self, res: Resources) -> None:
        start = time.monotonic()
        super()._mount(res)
        self.mount_seconds = time.monotonic() - start

    def reset_cache(self, res: Resources) -> str:
        drop_caches()
        return "drop_caches+daemon-cache-kept"

    def describe(self) -> dict:
        d = super().describe()
        d["mount_seconds"] = round(getattr(self, "mount_seconds", 0.0), 1)
        return d
