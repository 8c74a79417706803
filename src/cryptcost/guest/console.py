"""What comes back from a guest while and after it runs: its files relayed to this host's
streams as they grow, its console log kept, and that console read for why the guest died
(and whether that death is the emulator's, so that it boots again)."""

from __future__ import annotations

import re
from pathlib import Path

RUNNING = "cc-guest: running"           # the console line the guest writes as its command begins


class Relay:
    """Copies what a guest file gained since the last look to a host stream."""

    def __init__(self, path: Path, stream):
        self.path, self.stream, self.offset = path, stream, 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        if data:
            self.offset += len(data)
            self.stream.write(data)
            self.stream.flush()


# boots of a guest whose kernel dies of something that is not the run's: under TCG a 6.12 kernel
# has died patching its own code ("Oops: int3": a CPU ran the int3 of a static key's live patch
# after the patch ended), at boot in sched_clock_cpu and, once in CI, in the first TCP connect
# of a run (the key of the TCP sequence secret's one-time set-up), so the guest boots again
BOOTS = 2


def boot_again(console: str, accel: str) -> str | None:
    """Why a guest whose kernel died should boot again, or None (its death is the run's): it
    died before the guest's command began (no "cc-guest: running" line), or, under TCG, of an
    "Oops: int3", the emulator's race with the kernel patching its own code, whenever."""
    panic = re.search(r"Kernel panic[^\n]*", console)
    if panic is None:
        return None
    if RUNNING not in console:
        return (f"the guest's kernel died while booting, before cryptcost began "
                f"({panic.group(0).strip()})")
    if accel == "tcg" and re.search(r"Oops: int3\b", console):
        return ("the guest's kernel died of \"Oops: int3\" after cryptcost began (a CPU ran an "
                "int3 of the kernel's live patching of its own code after the patch ended: "
                "TCG's emulation races it); what it measured is dropped")
    return None


def failure_cause(console: str) -> str:
    """The first line of a guest's console that names why it failed."""
    for pattern in (r"cc-init: FAILED[^\n]*", r"Kernel panic[^\n]*", r"qemu-system-x86_64: [^\n]*",
                    r"BUG: [^\n]*"):
        m = re.search(pattern, console)
        if m:
            return m.group(0).strip()
    return "the guest stopped without reporting an exit code"


def keep_log(kept: Path, *paths: Path) -> None:
    parts = []
    for path in paths:
        try:
            parts.append(path.read_text(errors="replace"))
        except OSError:
            pass
    kept.write_text("\n".join(parts))
