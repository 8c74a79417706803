"""What each need installs follows from the stacks' declarations and this host's kernel:
``make run`` installs what the quick suite measures here and nothing else."""

from __future__ import annotations

import pytest

from cryptcost.errors import UserError
from cryptcost.suite import needs

# The CI machine's kernel (the brief), and a stock Debian kernel's.
CI_KERNEL = {"fuse", "loop", "fscrypt", "netns", "veth", "tun"}
STOCK = CI_KERNEL | {"dm-crypt", "device-mapper", "af_alg", "wireguard", "esp", "xfrm", "nfs",
                     "netem", "ecryptfs"}
# What only other needs install: servers with services of their own, kernels, the guest, the
# browser, programs of workloads the quick suite does not run.
NOT_FOR_RUN = {"samba", "nfs-kernel-server", "rpcbind", "krb5-kdc", "krb5-admin-server",
               "charon-systemd", "linux-image-amd64", "linux-image-6.12-amd64", "qemu-system-x86",
               "busybox-static", "chromium", "dbench", "bonnie++", "rsync", "zfs-dkms"}


def packages(names, monkeypatch, here):
    monkeypatch.setattr(needs, "features", lambda: set(here))
    return {n.name: n for n in needs.resolve(names)}


def test_run_is_the_quick_suite_on_this_kernel_and_nothing_else(monkeypatch):
    run = packages(["run"], monkeypatch, CI_KERNEL)["run"].packages
    assert {"fio", "openssl", "iperf3", "gocryptfs", "cryfs", "securefs", "encfs", "rclone",
            "qemu-utils", "bindfs", "linux-perf", "stunnel4", "openssh-server",
            "wireguard-go", "python3-venv"} <= run
    assert run & NOT_FOR_RUN == set()
    # no dm-crypt and no AF_ALG here: neither LUKS nor the kernel's cipher engine can run
    assert "cryptsetup-bin" not in run and "dmsetup" not in run and "tcplay" not in run


def test_run_on_a_stock_kernel_takes_its_kernel_stacks_and_drops_a_fallback(monkeypatch):
    run = packages(["run"], monkeypatch, STOCK)["run"].packages
    assert {"cryptsetup-bin", "dmsetup", "tcplay", "ecryptfs-utils"} <= run
    assert "wireguard-go" not in run                  # the kernel's WireGuard is measured
    assert run & NOT_FOR_RUN == set()


def test_a_stack_asked_for_by_name_brings_its_baselines_and_its_guest_kernel(monkeypatch):
    found = packages(["nfs", "gocryptfs"], monkeypatch, CI_KERNEL)
    assert {"nfs-kernel-server", "krb5-kdc", "rpcbind", "iperf3", "tcpdump",
            "linux-image-6.12-amd64"} <= found["nfs"].packages
    assert {"gocryptfs", "e2fsprogs"} <= found["gocryptfs"].packages
    on_stock = packages(["nfs"], monkeypatch, STOCK)["nfs"].packages
    assert "linux-image-6.12-amd64" not in on_stock   # the host's kernel serves NFS itself


def test_tests_is_every_need_and_the_guest_and_zfs(monkeypatch):
    found = packages(["tests"], monkeypatch, CI_KERNEL)
    assert {"run", "guest", "zfs", "stacks", "tests"} <= set(found)
    every = {p for n in found.values() for p in n.packages}
    assert NOT_FOR_RUN - {"zfs-dkms"} <= every
    assert needs.known_packages() <= every | found["zfs"].contrib
    assert found["zfs"].contrib == {"zfs-dkms", "zfsutils-linux"}


def test_a_suite_a_program_and_a_package_are_needs_too(monkeypatch):
    found = packages(["standard", "dbench", "bonnie++", "cryptsetup-bin"], monkeypatch, CI_KERNEL)
    assert {"samba", "charon-systemd", "dbench"} & found["standard"].packages
    assert found["dbench"].packages == {"dbench"}
    assert found["bonnie++"].packages == {"bonnie++"}
    assert found["cryptsetup-bin"].packages == {"cryptsetup-bin"}


def test_nothing_else_is_a_need(monkeypatch):
    monkeypatch.setattr(needs, "features", lambda: CI_KERNEL)
    with pytest.raises(UserError, match="nothing named 'nginx'; name run, tests, guest"):
        needs.resolve(["nginx"])


def test_zfs_reads_the_stock_kernel_the_install_just_brought(monkeypatch):
    """On a fresh machine, planning reads linux-image-amd64 as missing and the main install
    brings it: ZFS's build must ask again, not keep the first answer."""
    from cryptcost.cli import install
    from cryptcost.host import apt, kernel

    answers = iter(["", "linux-image-6.1.0-57-amd64"])
    monkeypatch.setattr(kernel.proc, "run", lambda *a, **k: type(
        "Done", (), {"returncode": 0, "stdout": next(answers)})())
    kernel.stock_version.cache_clear()
    assert kernel.stock_version() is None            # as planning saw it, before the install
    built = []
    monkeypatch.setattr(apt, "with_contrib", lambda: __import__("contextlib").nullcontext([]))
    monkeypatch.setattr(apt, "install", lambda pkgs, *a, **k: built.append(pkgs) or "change")
    monkeypatch.setattr(kernel, "bootable_with", type("B", (), {
        "cache_clear": staticmethod(lambda: None),
        "__call__": staticmethod(lambda module: ("6.1.0-57-amd64",))})())
    try:
        assert install._zfs() == "change"
    finally:
        kernel.stock_version.cache_clear()
    assert "linux-headers-6.1.0-57-amd64" in built[0]
