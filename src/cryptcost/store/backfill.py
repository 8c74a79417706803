"""Facts for results stored before stacks declared them (schema 4).

Since schema 4 every result carries its stack's declared facts in
``params.facts``, and the analysis reads nothing else. Results stored
earlier — in an old store, or exported by an older cryptcost on another
host — get them here, from the declarations those versions had. This table
is history: it is frozen, and new stacks never appear in it.
"""

from __future__ import annotations

_FUSE = ("fuse", "measured", "any-filesystem", ["fuse-passthrough", "plain"])
# stack → (layer, role, use case, baselines), as cryptcost 0.1 declared them
V3_FACTS: dict[str, tuple] = {
    "plain": ("kernel", "baseline", None, []),
    "fuse-passthrough": ("fuse", "baseline", None, ["plain"]),
    "qemu-raw": ("userspace", "baseline", None, ["plain"]),
    "dm-null": ("kernel", "baseline", None, ["plain"]),
    "fscrypt": ("kernel", "measured", "per-directory", ["plain"]),
    "luks": ("kernel", "measured", "whole-disk", ["plain"]),
    "luks-userspace": ("userspace", "measured", "whole-disk", ["qemu-raw", "plain"]),
    "zfs": ("kernel", "measured", "whole-disk", ["zfs:off"]),
    "gocryptfs": _FUSE, "cryfs": _FUSE, "securefs": _FUSE, "encfs": _FUSE, "rclone-crypt": _FUSE,
}


V3_ADVICE = {"luks": "on a host with dm-crypt, LUKS2 aes-xts-plain64 with 4096-byte sectors is "
                     "the usual choice"}


def add_skip_facts(extra: dict) -> bool:
    """Give a run's not-measured stacks (``extra.skipped``) the use case and
    advice a recommendation reads; True when something changed."""
    changed = False
    for entry in extra.get("skipped") or []:
        name = str(entry.get("stack", "")).split(":")[0]
        if name in V3_FACTS and "use_case" not in entry:
            entry["use_case"], entry["advice"] = V3_FACTS[name][2], V3_ADVICE.get(name)
            changed = True
    return changed


def add_facts(result: dict) -> bool:
    """Give a stored storage result its stack's facts when it has none;
    True when it changed."""
    if result.get("kind") != "storage":
        return False
    params = result.setdefault("params", {})
    if params.get("facts"):
        return False
    name, _, variant = result.get("stack", "").partition(":")
    layer, role, use_case, baselines = V3_FACTS.get(name, ("userspace", "measured", None, []))
    if name == "zfs" and variant == "off":
        role, use_case, baselines = "baseline", None, []
    params["facts"] = {"kind": "storage", "layer": layer, "role": role, "use_case": use_case,
                       "baselines": baselines, "security": list(result.get("security") or []),
                       "advice": None, "tools": {}, "features": [],
                       "cipher": params.get("cipher_ref"),
                       "backfilled": True}
    return True
