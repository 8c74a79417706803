"""``plain``: the baseline — the same filesystem on the same medium, no crypto.

This is the model implementation of :class:`~cryptcost.stacks.base.Stack`.
"""

from __future__ import annotations

from pathlib import Path

from cryptcost.errors import UserError
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
    # ``encrypt-feature``: the same ext4 with the ``encrypt`` feature that fscrypt
    # needs, nothing encrypted: fscrypt's nearest twin. Compared with ``plain``,
    # its overhead is what the feature alone costs every file.
    variants = {"default": {},
                "encrypt-feature": {"mkfs_features": "encrypt", "baselines": ("plain",),
                                    "isolates": "ext4's encrypt feature"}}

    def __init__(self, variant: str | None = None, fs: str = "ext4"):
        super().__init__(variant, fs)
        self.encrypt = self.params.get("mkfs_features") == "encrypt"
        # Its passes are copies at memory speed, which a VM's host splits into two speeds (by
        # hand, a third of its reads at a tenth to a half of the others' speed): half a second's
        # passes (a median of 4 writes and 11 reads in bench/read_minimum) came out no noisier
        # than a second's, a quarter second's (one to three) far noisier (docs/methodology.md).
        # The encrypt feature's copies ran steady at a quarter second.
        self.sample_floor = 0.0 if self.encrypt else 0.5
        if self.encrypt and fs != "ext4":
            raise UserError(f"plain:encrypt-feature is ext4's encrypt feature: it has no {fs} form")

    def setup(self, res: Resources, backing: Backing) -> Path:
        mnt = make_fs(res, backing.device, self.fs, encrypt=self.encrypt)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir
