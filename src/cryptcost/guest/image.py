"""The guest's kernel and initramfs, from Debian's packages alone.

- The kernel is ``linux-image-amd64``'s ``/boot/vmlinuz-VERSION``, with its
  modules in ``/lib/modules/VERSION`` (seen by the guest through the host's
  root filesystem).
- The initramfs holds busybox-static, the few modules needed to reach that
  root (virtio, 9p, overlay, ext4, resolved with ``modprobe --show-depends``)
  and :data:`INIT`. It is built once per kernel and script, and cached.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import Unavailable, UserError
from cryptcost.host import kernel as host_kernel

BOOT_MODULES = ("virtio_pci", "virtio_blk", "9pnet_virtio", "9p", "overlay", "ext4")
CACHE = Path(os.environ.get("CRYPTCOST_VM_CACHE", "/var/cache/cryptcost/vm"))
HOW = "cryptcost install guest"

# PID 1 of the initramfs: reach the host's root read-only, put a writable
# overlay on the scratch disk over it, and hand over to the run's script.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
fail() { echo "cc-init: FAILED: $*" > /dev/console; sync; echo o > /proc/sysrq-trigger; sleep 60; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /lib/modules/$m || fail "insmod $m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /host \
  || fail "cannot mount the host's root over 9p"
mount -t ext4 /dev/vda /scratch || fail "cannot mount the scratch disk /dev/vda"
mkdir -p /scratch/upper /scratch/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/scratch/upper,workdir=/scratch/work /newroot \
  || fail "cannot put the overlay on the host's root"
mkdir -p /newroot/cc-xchg
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 xchg /newroot/cc-xchg \
  || fail "cannot mount the exchange share"
[ -f /newroot/cc-xchg/guest.sh ] || fail "no guest.sh in the exchange share"
for d in proc sys dev; do mount --move /$d /newroot/$d; done
exec switch_root /newroot /bin/sh /cc-xchg/guest.sh
"""


@dataclass(frozen=True)
class GuestKernel:
    version: str
    image: Path

    @property
    def modules(self) -> Path:
        return Path("/lib/modules") / self.version


def _version_key(version: str) -> tuple:
    return tuple((0, int(n), "") if n.isdigit() else (1, 0, n) for n in re.split(r"[.+-]", version))


def kernels() -> list[GuestKernel]:
    """Kernels under /boot whose modules are installed, newest first."""
    found = []
    for image in Path("/boot").glob("vmlinuz-*"):
        version = image.name[len("vmlinuz-"):]
        if (Path("/lib/modules") / version / "modules.dep").exists():
            found.append(GuestKernel(version, image))
    return sorted(found, key=lambda k: _version_key(k.version), reverse=True)


def find_kernel(version: str | None = None) -> GuestKernel:
    """``version`` exactly, or the newest kernel it is a prefix of (``6.12``);
    by default the one ``linux-image-amd64`` stands for, else the newest."""
    found = kernels()
    if version:
        matching = [k for k in found if k.version == version or
                    k.version.startswith(version) and k.version[len(version)] in ".-+"]
        if matching:
            return matching[0]
        have = ", ".join(k.version for k in found) or "none"
        raise UserError(f"no guest kernel {version} (with modules) under /boot; installed: {have}")
    if not found:
        raise Unavailable("no kernel for the guest: /boot has no vmlinuz with modules in "
                          "/lib/modules",
                          HOW)
    stock = host_kernel.stock_version()
    return next((k for k in found if k.version == stock), found[0])


def qemu() -> str:
    """qemu-system-x86_64's path, or why the guest cannot boot without it."""
    path = proc.which("qemu-system-x86_64")
    if not path:
        raise Unavailable("qemu-system-x86_64 is not installed", HOW)
    return path


def boot_modules(kernel: GuestKernel) -> list[Path]:
    """The .ko files the initramfs loads, dependencies first."""
    paths: list[Path] = []
    for name in BOOT_MODULES:
        done = proc.run(["modprobe", "-S", kernel.version, "--show-depends", name], timeout=30)
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod" and Path(parts[1]) not in paths:
                paths.append(Path(parts[1]))
    return paths


def _busybox() -> Path:
    path = Path("/bin/busybox")
    if not path.exists():
        raise Unavailable("busybox is not installed", HOW)
    kind = proc.run(["file", "-b", str(path)], check=False,
                    timeout=10).stdout if proc.which("file") else ""
    if "dynamically linked" in kind:
        raise Unavailable("/bin/busybox is dynamically linked; the guest needs busybox-static",
                          HOW)
    return path


def build_initrd(kernel: GuestKernel) -> Path:
    """The initramfs for ``kernel``, from the cache when nothing changed."""
    busybox = _busybox()
    if not proc.which("cpio"):
        raise Unavailable("cpio is not installed: the guest's initramfs is a cpio archive", HOW)
    modules = boot_modules(kernel)
    digest = hashlib.sha256("\n".join([INIT, kernel.version, str(busybox.stat().st_mtime_ns),
                                       *map(str, modules)]).encode()).hexdigest()[:16]
    out = CACHE / f"initrd-{kernel.version}-{digest}.gz"
    if out.exists():
        return out
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the VM image cache {CACHE}: {exc.strerror}") from None
    tree = Path(tempfile.mkdtemp(prefix="cryptcost-initrd-"))
    try:
        for d in ("bin", "lib/modules", "proc", "sys", "dev", "host", "scratch", "newroot"):
            (tree / d).mkdir(parents=True)
        shutil.copy2(busybox, tree / "bin" / "busybox")
        for m in modules:
            shutil.copy2(m, tree / "lib" / "modules" / m.name)
        (tree / "modules").write_text("".join(f"{m.name}\n" for m in modules))
        (tree / "init").write_text(INIT)
        (tree / "init").chmod(0o755)
        partial = out.with_suffix(".partial")
        proc.run(["sh", "-c", 'cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2"',
                  "sh", str(tree), str(partial)], timeout=120)
        os.replace(partial, out)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return out
