"""``fuse-passthrough``: bindfs over a plain directory — the FUSE baseline.

It costs what FUSE costs (context switches, request splitting) and no
crypto, so ``gocryptfs ↔ fuse-passthrough`` isolates the price of the
cipher and ``fuse-passthrough ↔ plain`` the price of FUSE (rule 1).
"""

from __future__ import annotations

from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.fs import FuseStack


class FusePassthrough(FuseStack):
    name = "fuse-passthrough"
    description = "bindfs FUSE passthrough of a plain directory (FUSE baseline)"
    role = "baseline"
    baselines = ("plain",)
    use_case = None
    tools = (Tool("bindfs", "bindfs", "bindfs", ("bindfs", "--version")),)
    # bindfs is single-threaded by default; the crypto FUSE daemons are not,
    # and a slower baseline would flatter them.
    variants = {"default": {"bindfs_mode": "multithreaded"}}

    def mount_argv(self, res: Resources) -> list[str]:
        # -f: foreground, so the journal holds the daemon's pid.
        return ["bindfs", "-f", "--multithreaded", "--no-allow-other", str(self.lower), str(self.mnt)]
