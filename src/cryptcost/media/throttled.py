"""``throttled:RATE``: RAM behind qemu-storage-daemon's throttle — a device
of a speed the user names, to check the cost model against measurement.

A preallocated file on a private tmpfs, opened by qemu-storage-daemon with a
throttle group of RATE bytes/s (reads and writes together, ``bps-total``),
exported through FUSE and attached as a (buffered) loop device. A stack
built on it meets a device that is slow in a known, repeatable way: what
the cost model predicts from the RAM run (``--device-speed RATE``) can be
compared with what the stack really does there
(``analysis.costmodel.holds``; ``bench/costmodel_vs_throttled`` runs both).
QEMU's throttle lets short bursts through (about a tenth of a second's
worth), so the plain baseline on this medium reaches RATE or a little
more: the baseline, not RATE, is the device ceiling the analysis uses.
"""

from __future__ import annotations

from cryptcost.errors import UserError
from cryptcost.host import tools
from cryptcost.lifecycle.resources import Resources
from cryptcost.media import Backing, RamMedium
from cryptcost.units import parse_device_speed


class ThrottledMedium(RamMedium):
    name = "throttled"
    tools = (tools.tool("qemu-storage-daemon"),)           # what it needs beyond a RAM medium

    def __init__(self, rate_text: str):
        try:
            self.rate = parse_device_speed(rate_text)
        except UserError:
            raise UserError(f"bad --medium throttled:{rate_text}: "
                            "use e.g. throttled:200MB/s") from None
        self.label = rate_text

    @property
    def spec(self) -> str:
        return f"throttled:{self.label}"

    def require_room(self, size: int, count: int) -> None:
        if not self.tools[0].path():
            raise UserError("the throttled medium needs qemu-storage-daemon: cryptcost install "
                            "qemu-storage-daemon")
        super().require_room(size, count)

    def provide(self, res: Resources, size: int) -> Backing:
        image = self.image(res, size)
        export = image.parent / "export"
        export.touch()
        argv = ["qemu-storage-daemon",
                "--object", f"throttle-group,id=tg0,x-bps-total={int(self.rate)}",
                "--blockdev", f"driver=file,node-name=file0,filename={image}",
                "--blockdev", "driver=throttle,node-name=thr0,throttle-group=tg0,file=file0",
                "--export", f"type=fuse,id=exp0,node-name=thr0,mountpoint={export},writable=on"]
        res.fuse(argv, export, logfile=str(image.parent / "qsd.log"), exits_on_unmount=False)
        return Backing(res.loop(export, direct_io=False), size, self.describe()["medium"],
                       str(image),
                       cached=True)

    def describe(self) -> dict:
        return {"medium": f"throttled:{self.label}", "rate_bytes_per_s": self.rate}
