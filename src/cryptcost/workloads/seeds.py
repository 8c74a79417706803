"""The seeds suite: the five field reports cryptcost was built from (SEEDS.md), each redone
as one or more parts of a plan, named by their reports' labels (R1 … R5), and ``run --only``'s
choice among them (:func:`cryptcost.workloads.plan.only_reports`)."""

from __future__ import annotations

import re

from cryptcost.errors import UserError
from cryptcost.stacks import in_suite
from cryptcost.workloads import network as netwl

REPORTS = ("R1", "R2", "R3", "R4", "R5")       # the field reports the seeds suite redoes

R2_LUKS = ["aes-256-ecb", "aes-256-cbc-essiv", "aes-256-xts-plain64", "twofish-256-xts-plain64",
           "serpent-256-xts-plain64"]

# R3's question for every stack: what hardware acceleration is worth, and how it scales with cores.
ACCEL_CORES = {"ciphers": False, "network": False,
               "storage": {"stacks": ["all"], "workloads": ["seq-1m"], "accel": ["on", "off"],
                           "profile": True}}


def seeds_plans() -> list[dict]:
    """The five field reports' matrices as far as a host can run them (SEEDS.md)."""
    r1 = {"run": {"label": "R1 encrypted filesystems, large files"},
          "storage": {"stacks": ["plain", "fscrypt", "gocryptfs", "luks", "luks-userspace", "zfs"],
                      "workloads": ["bigfile", "rsync"], "size": "1024M"}}
    # R2's seven dm-crypt ciphers, AES-XTS at both key lengths, on XFS as R2's NAS was, with
    # R2's own bonnie++ (block write, rewrite, block read)
    r2 = {"run": {"label": "R2 cipher by cipher over block I/O"},
          "storage": {"stacks": [f"luks-userspace:{v}" for v in R2_LUKS] +
                      ["luks:aes-ecb", "luks:aes-cbc-essiv", "luks:aes-lrw-benbi",
                       "luks:aes-xts-plain64", "luks:aes-128-xts-plain64",
                       "luks:twofish-cbc-essiv", "luks:twofish-lrw-benbi",
                       "luks:twofish-xts-plain64"],
                      "workloads": ["seq-quick", "bonnie"], "size": "512M", "fs": "xfs"}}
    r3 = {"run": {"label": "R3 block sizes, cores and AES-NI over ramdisk → loop → crypto"},
          "ciphers": {"engines": ["openssl", "kernel"],
                      "algorithms": ["aes-256-xts", "aes-128-xts"],
                      "sizes": [512, 1024, 4096, 16384, 65536], "threads": [1, 2],
                      "accel": ["on", "off"]},
          # R3's whole chain: ramdisk → loop → device-mapper (dm-null: dm-crypt without a
          # cipher, luks's and tcrypt's twin) → dm-crypt (luks) or TrueCrypt (tcrypt)
          "storage": {"stacks": ["plain", "luks-userspace", "luks", "tcrypt"],
                      "accel": ["on", "off"],
                      "workloads": ["seq"], "size": "512M", "cpus": [1, 2]}}
    r3_stacks = {"run": {"label": "R3 AES-NI and cores for every stack, 1 MiB sequential"},
                 **ACCEL_CORES,
                 "storage": {**ACCEL_CORES["storage"], "cpus": [1, 2], "size": "512M"},
                 "network": {"stacks": in_suite("standard", "network", default_variants=True),
                             "workloads": ["send"], "accel": ["on", "off"], "cpus": [1, 2]}}
    # R3 packed and unpacked source trees; R4 ran dbench's NetBench mix: the same two on every
    # stack, against its baselines.
    r3_r4_files = {"run": {"label": "R3 and R4 small files (untar, create, read, stat, delete) and "
                                    "a mixed load (dbench) on every stack"},
                   "ciphers": False, "network": False,
                   "storage": {"stacks": ["all"], "workloads": ["smallfiles", "mixed"],
                               "size": "512M"}}
    # R4's and R5's columns are workloads (read and write, each direction): a time budget thins
    # those last
    r4 = {"run": {"label": "R4 NFS 3, and NFS 4.2 with Kerberos: sec=sys, krb5, krb5i, krb5p",
                  "keep": ["network.workloads"]},
          "ciphers": False, "storage": False,
          "network": {"stacks": ["nfs:*"], "workloads": ["put", "get", "smallfiles"]}}
    # R4 warned that a testbed on one host changes the picture: the same shares with a WAN's
    # round trip added (where the kernel has netem: cryptcost vm's guest).
    r4_wan = {"run": {"label": "R4 over a WAN: NFS 4.2 sec=sys and krb5p, 20 ms more per round "
                               "trip", "keep": ["network.workloads"]},
              "ciphers": False, "storage": False,
              "network": {"stacks": ["nfs:sys", "nfs:krb5p"], "workloads": ["put", "get"],
                          "delay_ms": 20}}
    # R4's mixed load: dbench in the client's mount, with more and more clients (its Figure 3)
    r4_dbench = {"run": {"label": "R4 dbench over NFS 3 and 4.2, sec=sys and krb5p, 1, 2, 4 "
                                  "and 8 clients"},
                 "ciphers": False, "storage": False,
                 "network": {"stacks": ["nfs:v3", "nfs:sys", "nfs:krb5p"], "workloads": ["dbench"],
                             "clients": list(netwl.CLIENTS)}}
    r5 = {"run": {"label": "R5 IPsec cipher/auth matrix, both directions",
                  "keep": ["network.workloads"]},
          "ciphers": False, "storage": False,
          "network": {"stacks": ["ipsec:*", "esp:*"], "workloads": ["send", "receive"]}}
    # R5 wanted IPComp's effect and gave up (its benchmark sent zeros): ESP with IPComp against
    # the same proposal without, on random and on compressible data
    r5_ipcomp = {"run": {"label": "R5 IPComp before ESP, random and compressible data",
                         "keep": ["network.workloads"]},
                 "ciphers": False, "storage": False,
                 "network": {"stacks": ["ipsec:aes128-sha1-ipcomp"],
                             "workloads": ["send", "compressible"]}}
    plans = [r1, r2, r3, r3_stacks, r3_r4_files, r4, r4_wan, r4_dbench, r5, r5_ipcomp]
    # as every built-in suite: each storage and network cell's warm-up round profiled where perf
    # can sample (no pass of its own), so that each verdict rests on where the CPU went
    for plan in plans:
        for kind in ("storage", "network"):
            if plan.get(kind):
                plan[kind]["profile"] = True
    return plans


def reports_of(label: str) -> set[str]:
    """The field reports a part's label names (``R3 and R4 small files`` → R3 and R4)."""
    return set(re.findall(r"\bR[1-5]\b", label))


def parse_only(only: str, option: str = "--only") -> tuple[str, ...]:
    """``run --only``'s (or ``--again``'s) field reports, sorted (``r4, R2`` → R2, R4)."""
    asked = {x.strip().upper() for x in only.split(",") if x.strip()}
    if not asked or asked - set(REPORTS):
        raise UserError(f"bad {option} {only!r}: name field reports, e.g. {option} R4 or "
                        f"{option} R2,R3 (choose from {', '.join(REPORTS)})")
    return tuple(sorted(asked))
