"""The journal and Resources: intent before creation, reverse-order release,
replay after a crash, no secrets in the journal."""

import os

import pytest

from cryptcost.errors import DataIntegrityError
from cryptcost.lifecycle import release
from cryptcost.runner.storage.integrity import verify_pattern
from cryptcost.lifecycle.journal import journals
from cryptcost.lifecycle.release import cleanup
from cryptcost.lifecycle.resources import Resources

RELEASED = []


@release.releaser("test-thing")
def _release(data):
    RELEASED.append(data["name"])


@pytest.fixture(autouse=True)
def _reset():
    RELEASED.clear()


def test_release_in_reverse_order(state_dir):
    with Resources() as res:
        for name in "abc":
            res.track("test-thing", name=name)
    assert RELEASED == ["c", "b", "a"]
    assert journals() == []                         # a clean run leaves no journal


def test_release_on_error(state_dir):
    with pytest.raises(RuntimeError):
        with Resources() as res:
            res.track("test-thing", name="x")
            raise RuntimeError("boom")
    assert RELEASED == ["x"]


def test_a_failed_creation_is_released_too(state_dir):
    def create(entry):
        raise RuntimeError("half made")
    res = Resources()
    with pytest.raises(RuntimeError):
        res.track("test-thing", create, name="half")
    assert RELEASED == ["half"]
    res.release_all()
    assert journals() == []


def test_crash_replay_releases_what_a_dead_owner_left(state_dir):
    res = Resources()
    res.track("test-thing", name="first")
    second = res.track("test-thing", name="second")
    res.release(second)
    path = res.journal.path
    # pretend the owner was killed: a pid that does not exist
    text = path.read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999')
    path.write_text(text + '{"op": "add", "id"')       # and a torn last line
    RELEASED.clear()
    report = cleanup()
    assert RELEASED == ["first"]
    assert any("released test-thing" in line for line in report)
    assert not path.exists()


def test_a_live_owner_is_left_alone(state_dir):
    res = Resources()
    res.track("test-thing", name="mine")
    report = cleanup()
    assert RELEASED == [] and "still alive" in report[0]
    res.release_all()


def test_keyfiles_are_private_wiped_and_never_journalled(state_dir, tmp_path, monkeypatch):
    keys = tmp_path / "cryptcost-keys-test"
    keys.mkdir()
    monkeypatch.setattr(Resources, "keydir", lambda self: keys)
    res = Resources()
    path, key = res.keyfile(32)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path.read_bytes() == key
    journal_text = res.journal.path.read_text()
    assert key.hex() not in journal_text and repr(key) not in journal_text
    res.release_all()
    assert not path.exists()


def test_integrity_check_passes_on_a_plain_directory(tmp_path):
    info = verify_pattern(tmp_path, size=1 << 20)
    assert info["result"] == "identical"


def test_integrity_check_catches_corruption(tmp_path):
    def corrupt(path):
        assert path == tmp_path / ".cryptcost-integrity"        # the reset is given the one file
        with open(path, "r+b") as fh:
            fh.seek(3 * 65536 + 17)
            byte = fh.read(1)[0]
            fh.seek(3 * 65536 + 17)
            fh.write(bytes([byte ^ 0xFF]))          # always a different byte (the data is random)
    with pytest.raises(DataIntegrityError, match="first at offset 196608"):
        verify_pattern(tmp_path, size=1 << 20, reset=corrupt)


def test_the_interrupt_message_follows_the_journal(state_dir):
    """'released' only when this process's journal has nothing pending."""
    from cryptcost.cli import released_message
    from cryptcost.lifecycle.journal import Journal
    assert "everything this run set up was released" in released_message()
    journal = Journal.create()
    journal.add("mount", target="/nowhere")
    journal.add("daemon", pid=1)
    text = released_message()
    assert (
        text.startswith("2 resource(s) could not be released (daemon, mount)")
        and "cryptcost cleanup" in text
    )
    for e in journal.pending():
        journal.mark_released(e)
    journal.remove_if_done()
    assert "everything this run set up was released" in released_message()


@pytest.mark.parametrize(
    "path", ["", ".", "..", "relative/dir", "/tmp", "/", "/tmp/cryptcost-x/../.."]
)
def test_release_never_removes_what_cryptcost_did_not_make(state_dir, tmp_path, monkeypatch, path):
    """A dir or key entry whose path is empty (journalled, killed before it was made),
    relative or not ours is left alone: ``Path("")`` is the current directory, and removing
    it once wiped a checkout. Replayed by cleanup as after kill -9, from a directory holding
    a file that must survive."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "precious").write_text("keep")
    monkeypatch.chdir(work)
    res = Resources(base=str(tmp_path))
    res.journal.add("dir", path=path)
    res.journal.add("keyfile", path=path)
    journal = res.journal.path
    journal.write_text(journal.read_text().replace(f'"pid": {os.getpid()}', '"pid": 999999999'))
    cleanup()
    assert (work / "precious").read_text() == "keep"
    assert os.path.isdir("/tmp") and not journal.exists()


def test_a_directory_is_journalled_with_its_full_path_before_it_exists(
    state_dir, tmp_path, monkeypatch
):
    seen = []
    real_add = Resources.track

    def spy(self, type_, create=None, **data):
        seen.append((type_, data.get("path"), os.path.exists(data.get("path", ""))))
        return real_add(self, type_, create, **data)
    monkeypatch.setattr(Resources, "track", spy)
    with Resources(base=str(tmp_path)) as res:
        made = res.tmpdir("cryptcost-t-")
        assert made.is_dir() and made.stat().st_mode & 0o777 == 0o700
    assert seen == [("dir", str(made), False)]
    assert not made.exists()


def test_a_hung_umount_is_detached_lazily_and_the_other_mounts_still_released(
    state_dir, monkeypatch
):
    """A umount that hangs is killed at the release step's deadline and the mount detached
    lazily; the mounts released after it are still released, and nothing stays pending."""
    from cryptcost import proc
    from cryptcost.errors import ProcessError
    calls, mounted = [], {"/x/cryptcost-hung", "/x/cryptcost-fine"}

    def fake_run(argv, check=True, timeout=120, **kw):
        calls.append(list(argv))
        if argv == ["umount", "/x/cryptcost-hung"]:
            raise ProcessError(list(argv), None, "", "", why=f"timed out after {timeout:g} s")
        mounted.discard(argv[-1])
        return proc.Completed(list(argv), 0, "", "", 0.0)
    monkeypatch.setattr(release.proc, "run", fake_run)
    monkeypatch.setattr(release, "is_mounted", lambda target: str(target) in mounted)
    monkeypatch.setattr(release, "UMOUNT_SECONDS", 0.5)
    res = Resources()
    res.track("mount", target="/x/cryptcost-fine")
    res.track("mount", target="/x/cryptcost-hung")
    res.release_all()
    assert calls == [["umount", "/x/cryptcost-hung"], ["umount", "-l", "/x/cryptcost-hung"],
                     ["umount", "/x/cryptcost-fine"]]
    assert mounted == set() and journals() == []


@pytest.mark.parametrize(
    "first,then", [("SIGTERM", "SIGTERM"), ("SIGINT", "SIGTERM"), ("SIGTERM", "SIGINT")]
)
def test_signals_during_release_wait_until_everything_is_released(state_dir, first, then):
    """Two signals while releasing (timeout(1) sends two; Ctrl-C reaches the whole group):
    every resource is still released, and the first signal is raised afterwards."""
    import signal

    from cryptcost.lifecycle.resources import Terminated, install_signal_handlers
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    install_signal_handlers()
    signal.signal(signal.SIGINT, signal.default_int_handler)

    @release.releaser("test-signal")
    def _send(data):
        os.kill(os.getpid(), getattr(signal, data["sig"]))
        RELEASED.append(data["name"])
    try:
        res = Resources()
        res.track("test-thing", name="a")
        res.track("test-signal", name="b", sig=then)
        res.track("test-signal", name="c", sig=first)
        with pytest.raises(KeyboardInterrupt if first == "SIGINT" else Terminated):
            res.release_all()
        assert RELEASED == ["c", "b", "a"] and journals() == []
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def test_fault_specs_parse():
    import signal

    from cryptcost.faults import parse
    assert parse("measure:SIGTERM:3:again=0.3") == ("measure", signal.SIGTERM, 3, False, 0.3, 0.3)
    assert parse("setup:kill:6") == ("setup", signal.SIGKILL, 6, False, 0.0, None)
    assert parse("teardown:SIGINT:1:group") == ("teardown", signal.SIGINT, 1, True, 0.0, None)
    with pytest.raises(ValueError):
        parse("lunch:SIGTERM")


def test_a_setting_is_journalled_with_its_old_value_and_restored_and_only_known_ones(
    tmp_path, monkeypatch
):
    """The workqueue cpumask of a pass on N CPUs: the old value is in the journal before
    the new one is written, release (or cleanup after a crash) writes it back; a path that
    is not one of release.SETTINGS is never written, by either side."""
    from cryptcost.errors import CryptcostError
    from cryptcost.lifecycle import release, resources
    from cryptcost.lifecycle.journal import Journal
    from cryptcost.lifecycle.resources import Resources
    mask = tmp_path / "cpumask"
    mask.write_text("3\n")
    monkeypatch.setattr(release, "SETTINGS", (str(mask),))
    monkeypatch.setattr(resources, "SETTINGS", (str(mask),))
    monkeypatch.setenv("CRYPTCOST_STATE_DIR", str(tmp_path / "state"))
    with Resources(Journal.create()) as res:
        entry = res.setting(str(mask), "1")
        assert mask.read_text() == "1" and entry.data["old"] == "3"
        with pytest.raises(CryptcostError, match="not a setting cryptcost changes"):
            res.setting(str(tmp_path / "other"), "1")
    assert mask.read_text() == "3"
    release.release_setting({"path": "/etc/passwd", "old": "x"})  # refused: not a known setting
    assert open("/etc/passwd").read() != "x"


class _Session:
    """A peer session whose ``ssh`` is still running while its worker is gone
    (``gone``: its output has ended), or one whose worker answers."""

    def __init__(self, gone: bool):
        self.gone, self.sent, self.closed = gone, [], False

    def alive(self):
        return True

    def send(self, line):
        self.sent.append(line)

    def recv(self, timeout):
        return None if self.gone else '{"id": 1, "ok": true, "result": null}'

    def output(self):
        return "Connection to cc-peer closed."

    def close_input(self):
        self.closed = True


@pytest.mark.parametrize("gone", [True, False])
def test_a_peer_entry_is_released_whether_its_worker_answers_or_its_session_has_ended(
        state_dir, gone):
    """A worker killed with SIGKILL ends its session, but ``ssh`` may not have
    exited when the run releases the link: asking the worker to release then
    meets the end of the session. The entry is released all the same (the
    peer's own journal holds what the worker held), and no journal is left."""
    from cryptcost.links import peer

    session = _Session(gone)
    peer._SESSIONS["t1"] = peer.RemoteEnd(session, "cc-peer")
    with Resources() as res:
        res.track("peer", host="cc-peer", token="t1")
    assert res.failures == []
    assert journals() == []
    assert session.closed and '"op": "release"' in session.sent[0]
