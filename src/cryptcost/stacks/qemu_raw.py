"""``qemu-raw``: the matched baseline of ``luks-userspace`` — the same
qemu-storage-daemon FUSE export, loop device and filesystem, with a raw
format layer instead of LUKS. The difference between the two is the
cipher, not FUSE or qemu."""

from __future__ import annotations

from pathlib import Path

from cryptcost.media import Backing
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.qemu_export import QemuExportStack


class QemuRaw(QemuExportStack):
    name = "qemu-raw"
    description = ("qemu-storage-daemon raw FUSE export + loop + filesystem (baseline of "
                   "luks-userspace)")
    role = "baseline"
    baselines = ("plain",)
    isolates = "qemu-storage-daemon's FUSE export and the loop over it"

    def prepare(self, res: Resources, backing: Backing, workdir: Path) -> list[str]:
        return ["--blockdev", "driver=raw,node-name=fmt0,file=file0"]
