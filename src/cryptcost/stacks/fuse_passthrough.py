"""``fuse-passthrough``: bindfs over a plain directory — the libfuse 2
baseline.

It costs what FUSE costs (context switches, request splitting) and no
crypto, so ``securefs ↔ fuse-passthrough`` isolates the price of the
cipher and ``fuse-passthrough ↔ plain`` the price of FUSE (rule 1).
bindfs is built on libfuse 2, like securefs, encfs and cryfs. Its
variants match their mount options: ``default`` leaves libfuse 2 splitting
writes into 4 KiB requests, as encfs does; ``big-writes`` asks for
``big_writes`` (128 KiB requests), as securefs and CryFS do — a baseline
without it wrote at a third of the speed here and made securefs look
faster than no encryption. Its reads take the same path as the default's
(``reads_like``), so the two are a control of each other: a run where they
read apart names the gap (``analysis.findings``).
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
    isolates = "FUSE (libfuse 2)"
    daemon_caches = False
    use_case = None
    tools = (Tool("bindfs", "bindfs", "bindfs", ("bindfs", "--version")),)
    # bindfs is single-threaded by default; the crypto FUSE daemons are not,
    # and a slower baseline would flatter them.
    variants = {"default": {"bindfs_mode": "multithreaded", "fuse_options": []},
                "big-writes": {"bindfs_mode": "multithreaded", "fuse_options": ["big_writes"],
                               "reads_like": "fuse-passthrough"}}

    @property
    def fuse_options(self) -> tuple[str, ...]:         # per variant
        return tuple(self.params["fuse_options"])

    def mount_argv(self, res: Resources) -> list[str]:
        # -f: foreground, so the journal holds the daemon's pid.
        opts = ["-o", ",".join(self.fuse_options)] if self.fuse_options else []
        return ["bindfs", "-f", "--multithreaded", "--no-allow-other", *opts, str(self.lower),
                str(self.mnt)]
