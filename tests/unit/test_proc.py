"""The one module that starts processes."""

import time
from pathlib import Path

import pytest

from cryptcost import proc
from cryptcost.errors import ProcessError, UserError

SRC = Path(__file__).resolve().parents[2] / "src" / "cryptcost"


def test_error_carries_output():
    with pytest.raises(ProcessError) as info:
        proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert info.value.returncode == 3
    assert info.value.stdout.strip() == "out" and info.value.stderr.strip() == "err"
    assert "exit code 3" in str(info.value)


def test_timeout_kills_the_whole_group():
    start = time.monotonic()
    with pytest.raises(ProcessError, match="timed out"):
        proc.run(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
    assert time.monotonic() - start < 10


def test_missing_program_is_a_user_error():
    with pytest.raises(UserError, match="not installed"):
        proc.run(["no-such-program-cryptcost"])


def test_secrets_never_reach_errors():
    with pytest.raises(ProcessError) as info:
        proc.run(["sh", "-c", "echo hunter2-secret >&2; exit 1", "x"], secrets=("hunter2-secret",))
    assert "hunter2-secret" not in str(info.value) + info.value.stderr + " ".join(info.value.argv)


def test_daemon_stop():
    d = proc.spawn(["sleep", "30"])
    assert d.alive()
    d.stop(timeout=2)
    assert not d.alive()
