"""``gofuse-passthrough``: go-fuse's own loopback over a plain directory —
the FUSE baseline of gocryptfs, on the same FUSE library (go-fuse v2, the
version Debian's gocryptfs is built with) and the same mount settings
(1 s attribute and entry timeouts, default mount options). So
``plain → gofuse-passthrough → gocryptfs`` splits gocryptfs's cost into
what FUSE costs and what its crypto costs.

``make`` builds it from the pinned Go module in ``packaging/gofuse``
(go-fuse's ``example/loopback``, unmodified) into the virtualenv.
"""

from __future__ import annotations

import os
import sys

from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.fs import FuseStack

_BINARY = os.path.join(sys.prefix, "bin", "cc-gofuse-loopback")
# The loopback prints no version; `make` keeps `go version -m`'s build record beside it, whose
# `mod` line is the go-fuse module it was built from (go may not be on root's PATH at run time).
LOOPBACK = Tool("gofuse-loopback", _BINARY,
                "make: go-fuse v2.1.0 example/loopback, built from packaging/gofuse (needs go)",
                ("cat", _BINARY + ".buildinfo"), r"mod\s+github\.com/hanwen/go-fuse/v2\s+v(\S+)")


class GofusePassthrough(FuseStack):
    name = "gofuse-passthrough"
    description = "go-fuse loopback of a plain directory (FUSE baseline of gocryptfs, same library)"
    role = "baseline"
    fuse_library = "go-fuse v2"
    isolates = "FUSE (go-fuse)"
    daemon_caches = False
    baselines = ("plain",)
    use_case = None
    tools = (LOOPBACK,)
    variants = {"default": {"library": "go-fuse v2.1.0", "attr_timeout_s": 1, "entry_timeout_s": 1}}

    def mount_argv(self, res: Resources) -> list[str]:
        return [LOOPBACK.binary, "-q", str(self.mnt), str(self.lower)]
