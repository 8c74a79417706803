"""The pieces of `cryptcost vm` that need no guest: the script the guest
runs, qemu's command line, and the one line a failed boot is reduced to."""

import json
import os
import shlex
import time
from pathlib import Path

import pytest

from cryptcost.guest import GUEST_DB, VmOptions, emulation, failure_cause, guest_script, qemu_argv
from cryptcost.guest.image import INIT, GuestKernel


def test_the_guest_runs_the_command_quoted_with_its_own_store_and_the_emulation_mark():
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    emulated = emulation(VmOptions(accel="tcg"), kernel)
    script = guest_script(
        ["storage", "--stacks", "luks; rm -rf /", "--json"], "/work/x y", emulated
    )
    line = next(l for l in script.splitlines() if "-m cryptcost" in l)
    argv = shlex.split(line.split(" > ")[0])
    assert argv[-6:] == ["--db", GUEST_DB, "storage", "--stacks", "luks; rm -rf /", "--json"]
    assert "cd '/work/x y'" in script and "mount -t tmpfs -o mode=0755 tmpfs /run" in script
    mark = next(l for l in script.splitlines() if l.startswith("export CRYPTCOST_EMULATED="))
    assert json.loads(shlex.split(mark.split("=", 1)[1])[0]) == emulated
    assert emulated["accel"] == "tcg" and "never ranked against" in emulated["why"]
    # the exit code is written last, after the store is copied out
    assert script.index("cp \"$f\"") < script.index("mv /cc-xchg/rc.tmp /cc-xchg/rc")
    # the guest imports the very code this process runs, not whatever its interpreter finds
    import cryptcost
    code = next(l for l in script.splitlines() if l.startswith("export PYTHONPATH="))
    assert Path(shlex.split(code.split("=", 1)[1])[0], "cryptcost", "__init__.py") == \
        Path(cryptcost.__file__).resolve()


def test_qemu_shares_the_root_read_only_and_blacklists_modules_on_the_kernel_line(tmp_path):
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    argv = qemu_argv(
        VmOptions(accel="tcg", blacklist=("aesni_intel",)), kernel, tmp_path / "i.gz",
        tmp_path / "s.img", tmp_path / "x", tmp_path / "c.log",
    )
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert shares[0].startswith("local,path=/,mount_tag=hostroot") and "readonly=on" in shares[0]
    assert "readonly" not in shares[1]
    append = argv[argv.index("-append") + 1]
    assert "modprobe.blacklist=aesni_intel" in append and "panic=-1" in append
    assert argv[argv.index("-accel") + 1] == "tcg" and "-no-reboot" in argv


def test_a_failed_boot_is_named_in_one_line():
    assert failure_cause("x\ncc-init: FAILED: cannot mount the scratch disk /dev/vda\nmore") == \
        "cc-init: FAILED: cannot mount the scratch disk /dev/vda"
    assert failure_cause(
        "[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n"
    ).startswith("Kernel panic - not syncing")
    assert failure_cause("") == "the guest stopped without reporting an exit code"
    assert "fail \"insmod $m\"" in INIT  # every init step names itself when it fails


def test_auto_picks_kvm_only_where_it_boots_the_kernel_quickly_and_remembers(tmp_path, monkeypatch):
    """Nested KVM on a CI machine aborts ('failed to set MSR') or crawls: --accel auto probes
    one kernel boot under KVM and falls back to TCG, saying why; the verdict is remembered."""
    import os
    from cryptcost import proc
    from cryptcost.errors import ProcessError
    from cryptcost import guest as vm
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    qemu = tmp_path / "qemu"
    qemu.write_text("")
    monkeypatch.setattr(vm, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(proc, "require", lambda name, package=None: str(qemu))
    assert vm.choose_accel(VmOptions(accel="tcg"), kernel) == ("tcg", "asked for")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert vm.choose_accel(VmOptions(), kernel) == ("tcg", "no usable /dev/kvm")
    monkeypatch.setattr(os, "access", lambda path, mode: True)
    runs = []

    def boots(argv, **kw):
        runs.append(argv)
        return proc.Completed(
            argv, 0, "[ 0.4] Kernel panic - not syncing: VFS: Unable to mount root fs", "", 0.6
        )

    monkeypatch.setattr(proc, "run", boots)
    assert vm.choose_accel(VmOptions(), kernel) == ("kvm", "KVM boots the kernel in 0.6 s")
    assert runs[0][runs[0].index("-accel") + 1] == "kvm"
    assert vm.choose_accel(VmOptions(), kernel)[0] == "kvm" and len(runs) == 1        # remembered
    for f in (tmp_path / "cache").iterdir():
        f.unlink()

    def aborts(argv, **kw):
        return proc.Completed(
            argv, 134, "", "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\n", 0.03
        )

    monkeypatch.setattr(proc, "run", aborts)
    accel, why = vm.choose_accel(VmOptions(), kernel)
    assert accel == "tcg" and "failed to set MSR 0x10a" in why
    for f in (tmp_path / "cache").iterdir():
        f.unlink()

    def crawls(argv, **kw):
        raise ProcessError(argv, None, "", "", why="timed out after 10 s")
    monkeypatch.setattr(proc, "run", crawls)
    accel, why = vm.choose_accel(VmOptions(), kernel)
    assert accel == "tcg" and "did not boot the kernel within 10 s" in why


def test_the_guest_reads_the_hosts_tool_versions_instead_of_asking_again(tmp_path, monkeypatch):
    """Its root is the host's: the versions `cryptcost vm` writes are the guest's own. A tool
    the file lacks is still asked, and several tools of one package ask dpkg once."""
    from cryptcost import proc
    from cryptcost.host import tools
    kernel = GuestKernel("6.1.0-56-amd64", Path("/boot/vmlinuz-6.1.0-56-amd64"))
    script = guest_script(["probe"], "/", emulation(VmOptions(accel="tcg"), kernel))
    assert f"export {tools.KNOWN}=/cc-xchg/tools.json" in script
    known = tmp_path / "tools.json"
    known.write_text(json.dumps({"fio": "9.99"}))
    monkeypatch.setenv(tools.KNOWN, str(known))
    asked = []
    real = proc.run
    monkeypatch.setattr(
        proc, "run", lambda argv, **kw: asked.append(list(argv)) or real(argv, **kw)
    )
    tools.forget()
    try:
        assert tools.version("fio") == "9.99"
        one = tools.Tool("cc-a", "sh", "dash", ())
        two = tools.Tool("cc-b", "sh", "dash", ())
        assert tools.version(one) == tools.version(two) != "unknown"
        assert tools.version("tar") and tools.version("tar") != "9.99"
    finally:
        tools.forget()
    assert not any("fio" in a for a in asked)
    assert sum(a[:1] == ["dpkg-query"] for a in asked) == 1 and ["tar", "--version"] in asked


def test_a_tool_that_printed_no_version_is_asked_again_and_the_hosts_unknown_is_not_taken(
        tmp_path, monkeypatch):
    """`zfs version` prints none before the module is loaded: the run's probe asks before the
    stack's set-up loads it, and the host (no module) writes "unknown" for its guest. The
    version read after set-up is the one a result keeps."""
    from cryptcost.host import tools
    loaded = tmp_path / "loaded"
    late = tools.Tool("cc-late", "sh", "dash",
                      ("sh", "-c", f"test -e {loaded} && echo cc-late-1.2.3 || echo not loaded"))
    known = tmp_path / "tools.json"
    known.write_text(json.dumps({"cc-late": "unknown"}))
    monkeypatch.setenv(tools.KNOWN, str(known))
    tools.forget()
    try:
        assert tools.version(late) == "unknown"
        loaded.touch()
        assert tools.version(late) == "1.2.3"
        loaded.unlink()
        assert tools.version(late) == "1.2.3"      # a version found is kept
    finally:
        tools.forget()


def test_a_packages_version_is_dpkgs_whole_even_without_a_dot(monkeypatch):
    """A tool that prints no version of its own has its package's: ecryptfs-utils is 111-6 on
    Debian 12, which the default pattern (a dotted number) found nothing in."""
    from types import SimpleNamespace

    from cryptcost import proc
    from cryptcost.host import tools
    asked = []

    def dpkg(argv, **kw):
        asked.append(list(argv))
        return SimpleNamespace(stdout="111-6", stderr="", returncode=0)
    monkeypatch.setattr(proc, "run", dpkg)
    tools.forget()
    try:
        helper = tools.Tool("cc-helper", "sh", "cc-utils", ())
        assert tools.version(helper) == "111-6"
        assert asked == [["dpkg-query", "-W", "-f=${Version}", "cc-utils"]]
    finally:
        tools.forget()


def test_a_packages_epoch_is_not_part_of_its_version(monkeypatch):
    """dpkg writes nfs-kernel-server's version with its epoch (``1:``); the version kept is
    without it, as a run begun earlier recorded it, so a resumed run does not call the same
    program changed."""
    from types import SimpleNamespace

    from cryptcost import proc
    from cryptcost.host import tools
    monkeypatch.setattr(proc, "run", lambda argv, **kw: SimpleNamespace(
        stdout="1:2.6.2-4+deb12u1", stderr="", returncode=0))
    tools.forget()
    try:
        assert tools.version(tools.Tool("cc-nfsd", "sh", "cc-nfs", ())) == "2.6.2-4+deb12u1"
    finally:
        tools.forget()


def test_dpkgs_error_is_not_taken_for_a_version(monkeypatch):
    """A package dpkg does not know answers with an error on stderr and status 1, whose first
    word ("dpkg-query:") the whole-version pattern matched: gofuse-loopback's version read so."""
    from types import SimpleNamespace

    from cryptcost import proc
    from cryptcost.host import tools
    monkeypatch.setattr(proc, "run", lambda argv, **kw: SimpleNamespace(
        stdout="", stderr=f"dpkg-query: no packages found matching {argv[-1]}\n", returncode=1))
    tools.forget()
    try:
        assert tools.version(tools.Tool("cc-orphan", "sh", "cc-nowhere", ())) == "unknown"
    finally:
        tools.forget()


def test_a_kernel_that_dies_while_booting_or_of_tcgs_int3_race_is_booted_again_once_and_said(
        tmp_path, monkeypatch, state_dir):
    """A guest kernel that panics before the guest's command began (TCG has killed a 6.12 boot
    in its own code patching), or under TCG of "Oops: int3" after it began (CI saw one in a
    run's first TCP connect), is booted once more, its first console kept and named and the
    second boot's output relayed whole; any other panic after the command began is the run's
    failure, as is an int3 under KVM, and a second death either way."""
    import io

    import cryptcost.guest as guest
    from cryptcost.lifecycle.resources import Resources

    kernel = GuestKernel("6.12.0-amd64", Path("/boot/vmlinuz-6.12.0-amd64"))

    def fake(boots: list[str], accel: str = "tcg"):
        """A qemu that writes each boot's console and stdout in turn, and the exit code where
        the console says "rc"."""
        work = tmp_path / f"work{len(list(tmp_path.glob('work*')))}"

        def prepare(res, opts, log_dir):
            (work / "xchg").mkdir(parents=True)
            log_dir.mkdir(parents=True, exist_ok=True)
            counter = work / "boots"
            counter.write_text("0")
            script = work / "qemu.sh"
            cases = "\n".join(
                f"  {i}) printf '%s\\n' {shlex.quote(text)} > {work}/console.log; "
                f"printf 'boot {i}%s\\n' {'.' * (20 - 10 * i)} > {work}/xchg/stdout; "
                + (f"echo 0 > {work}/xchg/rc;; " if "rc" in text else ";; ")
                for i, text in enumerate(boots))
            script.write_text(f"#!/bin/sh\nn=$(cat {counter}); echo $((n + 1)) > {counter}\n"
                              f"case $n in\n{cases}\nesac\n")
            script.chmod(0o755)
            boot = guest.Boot(opts, kernel, work / "i.gz", work, work / "xchg", work / "s.img",
                              work / "console.log", log_dir / "vm-1.log", {"accel": accel})
            monkeypatch.setattr(boot, "qemu", lambda tap=None: [str(script)])
            return boot
        monkeypatch.setattr(guest, "prepare", prepare)
        return work / "boots"

    panic = "[ 1.6] Oops: int3\n[ 1.7] Kernel panic - not syncing: Fatal exception in interrupt"
    for first, why in ((panic, "died while booting"),
                       ("cc-guest: running\n" + panic, "after cryptcost began")):
        for old in (tmp_path / "logs").glob("*"):
            old.unlink()
        boots = fake([first, "cc-guest: running\nrc"])
        err, out = io.BytesIO(), io.BytesIO()
        with Resources() as res:
            done = guest.run_guest(res, ["ciphers"], VmOptions(timeout=30), tmp_path / "logs",
                                   stdout=out, stderr=err)
        assert done.returncode == 0 and boots.read_text().strip() == "2"
        said = err.getvalue().decode()
        assert why in said and ("Kernel panic - not syncing" in said or "int3" in said), said
        first_log = tmp_path / "logs" / "vm-1-boot1.log"
        assert "Oops: int3" in first_log.read_text() and str(first_log) in said
        assert "Oops" not in done.console.read_text()
        assert out.getvalue().decode().endswith("boot 1" + "." * 10 + "\n"), out.getvalue()

    bug = ("cc-guest: running\n[ 9.1] BUG: kernel NULL pointer dereference\n"
           "[ 9.2] Kernel panic - not syncing: Fatal exception")
    for twice, accel in (([panic, panic], "tcg"), ([bug], "tcg"),
                         (["cc-guest: running\n" + panic], "kvm"),
                         (["cc-guest: running\n" + panic] * 2, "tcg")):
        boots = fake(twice, accel)
        with Resources() as res, pytest.raises(guest.GuestCut, match="Kernel panic"):
            guest.run_guest(res, ["ciphers"], VmOptions(timeout=30), tmp_path / "logs",
                            stdout=io.BytesIO(), stderr=io.BytesIO())
        assert boots.read_text().strip() == str(len(twice))


@pytest.mark.parametrize("guest_does", ["stops", "ignores", "boots", "interrupted"])
def test_a_guest_at_its_timeout_is_asked_to_stop_its_command_and_keeps_its_whole_store(
        tmp_path, monkeypatch, state_dir, guest_does):
    """At --timeout a guest whose command began is asked to stop it (a file in the share; the
    guest's script sends the command SIGTERM): one that ends in the grace time hands back its
    whole store, which is what the cut keeps; one that does not is killed at the grace's end
    and keeps its last periodic copy; one still booting is killed at once. Ctrl-C here stops
    the command the same way, and the cut carries the interrupt for the caller to raise."""
    import io

    import cryptcost.guest as guest
    from cryptcost.lifecycle.resources import Resources

    kernel = GuestKernel("6.12.0-amd64", Path("/boot/vmlinuz-6.12.0-amd64"))
    work = tmp_path / "work"
    (work / "xchg").mkdir(parents=True)
    xchg = work / "xchg"
    db = os.path.basename(GUEST_DB)
    begin = "" if guest_does == "boots" else "echo 'cc-guest: running' > console.log; "
    stops = f"echo 143 > xchg/rc; echo whole > xchg/{db}; exit 0"
    on_stop = {"stops": stops, "interrupted": stops,
               "ignores": "sleep 60", "boots": "sleep 60"}[guest_does]
    script = work / "qemu.sh"
    script.write_text(f"#!/bin/sh\ncd {work}\n{begin}echo partial > xchg/{guest.PARTIAL}\n"
                      f"while [ ! -e xchg/{guest.STOP} ]; do sleep 0.1; done\n{on_stop}\n")
    script.chmod(0o755)

    def prepare(res, opts, log_dir):
        log_dir.mkdir(parents=True, exist_ok=True)
        boot = guest.Boot(opts, kernel, work / "i.gz", work, xchg, work / "s.img",
                          work / "console.log", log_dir / "vm-1.log", {"accel": "tcg"})
        monkeypatch.setattr(boot, "qemu", lambda tap=None: [str(script)])
        return boot
    monkeypatch.setattr(guest, "prepare", prepare)
    monkeypatch.setattr(guest, "STOP_GRACE", 3.0)
    timeout = 1
    if guest_does == "interrupted":           # Ctrl-C on this host, long before the timeout
        timeout, sleeps, sleep = 60, [], time.sleep

        def interrupted(seconds):
            sleeps.append(seconds)
            if len(sleeps) == 5:
                raise KeyboardInterrupt
            sleep(seconds)
        monkeypatch.setattr(time, "sleep", interrupted)
    started = time.monotonic()
    with Resources() as res, pytest.raises(guest.GuestCut) as cut:
        guest.run_guest(res, ["run"], VmOptions(timeout=timeout), tmp_path / "logs",
                        stdout=io.BytesIO(), stderr=io.BytesIO())
    took = time.monotonic() - started
    said, kept = str(cut.value), cut.value.partial
    assert isinstance(cut.value.interrupt, KeyboardInterrupt) == (guest_does == "interrupted")
    if guest_does == "interrupted":
        assert said.startswith("interrupted: the guest's command was stopped, and stored what "
                               "it had measured (console log: ")
        assert kept.read_text().strip() == "whole" and took < 3
    elif guest_does == "stops":
        assert "its command was stopped (SIGTERM), and stored what it had measured" in said
        assert kept.read_text().strip() == "whole" and took < 3
    else:
        assert "did not finish within 1 s and was killed" in said, said
        assert kept.read_text().strip() == "partial"
        assert (took >= 3) == (guest_does == "ignores"), took
    assert (xchg / guest.STOP).exists() == (guest_does != "boots")


def test_ctrl_c_during_a_guest_imports_what_it_stored_then_ends_as_interrupted(
        tmp_path, monkeypatch, state_dir, capsys):
    """`cryptcost vm` interrupted: the guest's store (its command stopped and stored what it
    measured) is imported as an emulated run, said on stderr, and the command then ends as
    every interrupted one does: exit 130, everything released."""
    import signal

    import cryptcost.cli.vm as vm
    from cryptcost.cli import main
    from cryptcost.guest import GuestCut
    from cryptcost.store.db import Store

    guest_db = tmp_path / "guest.db"
    guest = Store.open(guest_db)
    run_id = guest.begin_run("run", {"hostname": "cc-guest"})
    guest.finish_run(run_id, "interrupted")
    guest.close()

    def cut(res, argv, opts, log_dir, **kw):
        raise GuestCut("interrupted: the guest's command was stopped, and stored what it had "
                       "measured (console log: x.log)", guest_db, {"accel": "tcg"},
                       KeyboardInterrupt())
    monkeypatch.setattr(vm, "run_guest", cut)
    before = signal.getsignal(signal.SIGTERM)
    try:
        rc = main(["--db", str(tmp_path / "host.db"), "vm", "--", "probe"])
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 130 and err[-1].startswith("error: interrupted; "), err
    assert err[-2] == ("vm: interrupted: the guest's command was stopped, and stored what it had "
                       "measured (console log: x.log); what it measured until then is imported "
                       "as emulated run(s) 1"), err
    host = Store.open(tmp_path / "host.db", create=False)
    [imported] = host.runs()
    assert imported.status == "interrupted" and imported.host["emulated"] == {"accel": "tcg"}
