"""``probe``: everything about this host that changes an encryption number
(METHODOLOGY rule 13), plus which stacks can run here and why not.

The same dict is stored with every run, so that two runs can be compared
and their environment differences named.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import platform
import socket

from cryptcost import __version__
from cryptcost.host import cpu, kernel, tools

# Software AES in the kernel is worth a sentence of its own: it is why an
# fscrypt or dm-crypt number can be far below OpenSSL's on the same CPU.
_WATCHED = ("aes", "ecb(aes)", "cbc(aes)", "xts(aes)", "ctr(aes)", "gcm(aes)")


def probe(extra_tools: tuple = ()) -> dict:
    """The host as one JSON-able dict; ``extra_tools`` are programs the
    stacks declare, whose versions are recorded too. The caller adds the
    stacks' availability (:func:`cryptcost.cli.common.probe_host`)."""
    info = {
        "cryptcost": __version__,
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "root": os.geteuid() == 0,
        "cpu": cpu.cpu_info(),
        "memory": cpu.memory(),
        "kernel": kernel.kernel_info(),
        "crypto_drivers": kernel.crypto_drivers(),
        "features": kernel.features(),
        "page_reporting": kernel.page_reporting(),
        "damon_pageout": kernel.damon_pageout(),
        "tools": tools.versions(extra_tools),
    }
    emulated = emulation()
    if emulated:
        info["emulated"] = emulated
    info["notes"] = notes(info)
    return info


# ``cryptcost vm`` writes how its guest is emulated here, in the guest's own /run, for every
# process there (an ssh session of ``vm --peer`` included), and in CRYPTCOST_EMULATED for its
# command
EMULATED_FILE = Path("/run/cryptcost-emulated.json")


def emulation() -> dict | None:
    """How this machine is emulated, where it is ``cryptcost vm``'s guest; None elsewhere."""
    text = os.environ.get("CRYPTCOST_EMULATED")
    if not text:
        try:
            text = EMULATED_FILE.read_text()
        except OSError:
            return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def notes(info: dict) -> list[str]:
    """Plain sentences about what matters in this environment."""
    out = []
    flags = info["cpu"]["flags"]
    drivers = info["crypto_drivers"]
    for name in _WATCHED:
        d = drivers.get(name)
        if d and d["implementation"] == "software" and flags.get("aes"):
            out.append(f"kernel {name} is served by {d['driver']}, a software AES, although the "
                       "CPU has AES-NI: kernel-side encryption (dm-crypt, fscrypt) will be "
                       "cipher-bound far below OpenSSL's speed")
            break
    if "xts(aes)" not in drivers:
        base = drivers.get("aes", {}).get("driver", "?")
        out.append(f"xts(aes) is not instantiated yet; the kernel will build it from {base} "
                   "on first use")
    gov = info["cpu"].get("governor")
    if gov and gov != "performance":
        out.append(f"CPU governor is {gov}: results vary with the clock; set 'performance' "
                   "(cpupower frequency-set -g performance) for steadier numbers")
    if gov is None:
        out.append("CPU frequency scaling is not visible (virtual machine?): the clock is "
                   "unknown to cryptcost, so cycles/byte use the nominal MHz")
    reporting = info.get("page_reporting") or {}
    held = reporting.get("run") or {}
    if reporting.get("enabled") and held.get("held"):
        out.append("this VM hands the memory it frees back to its host (free page reporting); "
                   f"cryptcost held that off for the run (page_reporting_order {held['was']} → "
                   f"{held['order']}, an order no free block reaches), so memory freed between "
                   "passes stayed in the VM; what the run takes for the first time faults in from "
                   "the host once, before the first sample: every page of the RAM medium is "
                   "written at its creation, and twice the medium's size of memory is touched")
    elif reporting.get("enabled"):
        out.append("this VM hands the memory it frees back to its host (free page reporting): "
                   "memory it allocates again may fault in from the host first, several times "
                   "slower than memory reused (bench/page_reporting measures both ways), one "
                   "more reason page-cache figures vary from run to run"
                   + (f"; not held off for this run: {held['why']}" if held.get("why") else ""))
    for scheme in info.get("damon_pageout") or []:
        quota = scheme.get("quota_bytes")
        out.append(f"DAMON pages out this host's memory left idle for {scheme['idle_s']:g} s "
                   f"(kdamond {scheme['kdamond']}, {scheme['operations'] or '?'}"
                   + (f", up to {quota / 2**20:.0f} MiB every {scheme['quota_reset_ms']} ms"
                      if quota and scheme.get("quota_reset_ms") else "") +
                   "): a daemon's code or a file's pages left idle between a stack's rounds may "
                   "be read back from disk inside a sample" + (
                       ", and the memory freed handed back to the host"
                       if reporting.get("enabled") else "") + "; cryptcost leaves it as it is")
    if info.get("emulated"):
        out.append(info["emulated"]["why"])
    if not info["root"]:
        out.append("not running as root: storage and network stacks need root (sudo cryptcost …)")
    return out
