"""The pieces of `cryptcost vm` that need no guest: the script the guest
runs, qemu's command line, and the one line a failed boot is reduced to."""

import json
import shlex
from pathlib import Path

from cryptcost.runner.vm import GUEST_DB, VmOptions, emulation, failure_cause, guest_script, qemu_argv
from cryptcost.runner.vmimage import INIT, GuestKernel


def test_the_guest_runs_the_command_quoted_with_its_own_store_and_the_emulation_mark():
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    emulated = emulation(VmOptions(), kernel)
    script = guest_script(["storage", "--stacks", "luks; rm -rf /", "--json"], "/work/x y", emulated)
    line = next(l for l in script.splitlines() if "-m cryptcost" in l)
    argv = shlex.split(line.split(" > ")[0])
    assert argv[-6:] == ["--db", GUEST_DB, "storage", "--stacks", "luks; rm -rf /", "--json"]
    assert "cd '/work/x y'" in script and "mount -t tmpfs -o mode=0755 tmpfs /run" in script
    mark = next(l for l in script.splitlines() if l.startswith("export CRYPTCOST_EMULATED="))
    assert json.loads(shlex.split(mark.split("=", 1)[1])[0]) == emulated
    assert emulated["accel"] == "tcg" and "never ranked against" in emulated["why"]
    # the exit code is written last, after the store is copied out
    assert script.index("cp \"$f\"") < script.index("mv /cc-xchg/rc.tmp /cc-xchg/rc")


def test_qemu_shares_the_root_read_only_and_blacklists_modules_on_the_kernel_line(tmp_path):
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    argv = qemu_argv(VmOptions(blacklist=("aesni_intel",)), kernel, tmp_path / "i.gz", tmp_path / "s.img",
                     tmp_path / "x", tmp_path / "c.log")
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert shares[0].startswith("local,path=/,mount_tag=hostroot") and "readonly=on" in shares[0]
    assert "readonly" not in shares[1]
    append = argv[argv.index("-append") + 1]
    assert "modprobe.blacklist=aesni_intel" in append and "panic=-1" in append
    assert argv[argv.index("-accel") + 1] == "tcg" and "-no-reboot" in argv


def test_a_failed_boot_is_named_in_one_line():
    assert failure_cause("x\ncc-init: FAILED: cannot mount the scratch disk /dev/vda\nmore") == \
        "cc-init: FAILED: cannot mount the scratch disk /dev/vda"
    assert failure_cause("[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n").startswith(
        "Kernel panic - not syncing")
    assert failure_cause("") == "the guest stopped without reporting an exit code"
    assert "fail \"insmod $m\"" in INIT                      # every init step names itself when it fails
