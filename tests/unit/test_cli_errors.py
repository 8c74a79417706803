"""Bad input: one line on stderr, starting 'error:', exit code 2, no traceback."""

import pytest

from tests.conftest import assert_bad_input

CASES = [
    ("unknown algorithm", ["ciphers", "--algo", "rot13"]),
    ("bad size", ["ciphers", "--sizes", "4Q"]),
    ("negative size", ["ciphers", "--sizes", "-5"]),
    ("zero size", ["ciphers", "--sizes", "0"]),
    ("threads zero", ["ciphers", "--threads", "0"]),
    ("threads not a number", ["ciphers", "--threads", "two"]),
    ("unknown engine", ["ciphers", "--engine", "gpu"]),
    ("bad accel", ["ciphers", "--accel", "maybe"]),
    ("bad seconds", ["ciphers", "--seconds", "0"]),
    ("fractional network seconds", ["network", "--seconds", "1.5"]),
    ("min above max", ["ciphers", "--min-samples", "5", "--max-samples", "2"]),
    ("bad ci target", ["ciphers", "--ci-target", "0"]),
    ("unknown command", ["frobnicate"]),
    ("unknown flag", ["probe", "--colour"]),
    ("unknown run", ["show", "999"]),
    ("run id not a number", ["show", "abc"]),
    ("report of no store", ["report", "1"]),
]


_assert_user_error = assert_bad_input


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_bad_input(cli, name, args):
    _assert_user_error(cli(*args))


def test_unwritable_db_path(cli, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "file").write_text("x")
    # A path below a regular file cannot be created, whoever we are.
    _assert_user_error(cli("ciphers", "--db", str(ro / "file" / "r.db"), "--algo", "aes-128-gcm"))


def test_corrupt_db(cli, tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 500)
    _assert_user_error(cli("list", "--db", str(bad)))


def test_debug_shows_the_traceback(cli):
    proc = cli("show", "999", "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_global_options_work_before_or_after_the_subcommand(cli, tmp_path):
    db = tmp_path / "none.db"
    for args in (("--db", str(db), "list"), ("list", "--db", str(db))):
        proc = cli(*args)
        assert proc.returncode == 2 and f"no result store at {db}" in proc.stderr, args
    proc = cli("--debug", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("cryptcost ")


def test_a_slow_runs_log_names_its_longest_gap_and_a_retry_loop_that_took_longer():
    """The fault matrix's slow runs say where they waited: one long gap, or a command that
    repeated (a busy umount retried for a minute: no gap over 1.5 s, 60 s in all)."""
    from tests.conftest import longest_wait

    retried = "\n".join(
        ["   100ms DEBUG cryptcost.proc: run: fio --name=x --rw=write"]
        + [f"   {1000 + i * 1500}ms DEBUG cryptcost.proc: run: umount /tmp/cryptcost-ext4-1/mnt"
           for i in range(40)]
        + ["  61000ms WARNING cryptcost.release: /tmp/cryptcost-ext4-1/mnt was busy"])
    gap, said = longest_wait(retried)
    assert gap == 1.5 and "60.0 s after 40 lines of: run: umount /tmp/cryptcost-ext4-1/mnt" in said
    stalled = "   100ms DEBUG a: run: fio --name=x\n 95100ms DEBUG a: run: umount /tmp/y\n"
    gap, said = longest_wait(stalled)
    assert gap == 95.0 and "95.0 s later" in said and "in all" not in said
    assert longest_wait("no stamps") == (0.0, "")
