"""``plain``: the baseline — the same filesystem on the same medium, no crypto.

This is the reference implementation of :class:`~cryptcost.stacks.base.Stack`.
"""

from __future__ import annotations

from pathlib import Path

from cryptcost.media import Backing
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.fs import StorageStack, make_fs


class Plain(StorageStack):
    name = "plain"
    description = "the filesystem alone on the same medium (baseline)"
    layer = "kernel"
    file_cache_only = True
    role = "baseline"
    tools = ("mkfs.ext4",)
    features = ("loop",)
    honours_direct = True

    def setup(self, res: Resources, backing: Backing) -> Path:
        mnt = make_fs(res, backing.device, self.fs)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir
