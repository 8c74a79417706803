"""No green CI that skipped its checks: run as a user other than root, `.ci/run`
refuses at once, and a required stack's test fails rather than skips. Each runs the
real thing as the unprivileged user ``nobody`` (setpriv), from this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.system.conftest import need_root

ROOT = Path(__file__).resolve().parents[2]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _as_nobody(
    argv: list[str], env: dict, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    blocked = [str(p) for p in (ROOT, *ROOT.parents) if not os.stat(p).st_mode & 0o005]
    assert not blocked, (
        f"nobody cannot reach this checkout through {blocked}: clone it where others may read"
    )
    return subprocess.run(
        NOBODY + argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


@pytest.mark.root
def test_ci_run_refuses_anyone_but_root(tmp_path):
    """One line, exit code 2, and nothing run: a `make` on the PATH would leave a mark."""
    need_root()
    fake = Path(tempfile.mkdtemp(prefix="cc-fake-make-"))
    try:
        os.chmod(fake, 0o777)
        marker = fake / "make-ran"
        (fake / "make").write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
        os.chmod(fake / "make", 0o755)
        env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
        done = _as_nobody(["bash", str(ROOT / ".ci/run")], env, fake, timeout=60)
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: .ci/run needs root (uid 65534)"), (
            done.stderr
        )
        assert not marker.exists(), ".ci/run went on to make"
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(fake)], check=True)


@pytest.mark.root
def test_a_required_stacks_test_run_as_another_user_fails_instead_of_skipping():
    """The same test as nobody: skipped ("needs root") when nothing is required, failed when
    CRYPTCOST_REQUIRE names its stack, as CI sets it."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="cc-nobody-"))
    try:
        os.chmod(base, 0o777)
        test = "tests/system/test_storage_real.py::test_stack_measured_against_its_baseline[plain]"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
                "-rfs", test]
        env = {k: v for k, v in os.environ.items() if k != "CRYPTCOST_REQUIRE"}
        env.update(PYTHONDONTWRITEBYTECODE="1", HOME=str(base))
        free = _as_nobody(argv + [f"--basetemp={base}/free"], env, ROOT)
        assert free.returncode == 0 and "1 skipped" in free.stdout, (
            free.stdout[-2000:] + free.stderr[-2000:]
        )
        assert "needs root (running as uid 65534)" in free.stdout, free.stdout[-2000:]
        env["CRYPTCOST_REQUIRE"] = "plain"
        held = _as_nobody(argv + [f"--basetemp={base}/held"], env, ROOT)
        # (failed in its shared fixture, pytest says "error": exit code 1 all the same)
        assert held.returncode == 1 and ("1 failed" in held.stdout or "1 error" in held.stdout), \
            held.stdout[-2000:] + held.stderr[-2000:]
        assert (
            "plain is required here (CRYPTCOST_REQUIRE) but cannot run: needs root" in held.stdout
        )
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=True)
