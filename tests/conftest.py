"""Shared fixtures. Tests that need root and real kernel features are marked
``root``; they skip elsewhere — unless ``CRYPTCOST_REQUIRE`` names the stack,
in which case a skip is a failure (CI sets it)."""

from __future__ import annotations

import collections
import glob
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TOOLS = FIXTURES / "tools"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the current output instead of comparing")


@pytest.fixture
def golden(request):
    """Compare text with tests/golden/NAME, or rewrite it with --update-golden."""
    def check(name: str, text: str) -> None:
        path = Path(__file__).parent / "golden" / name
        if request.config.getoption("--update-golden"):
            path.write_text(text)
            return
        assert path.exists(), f"no golden file {path}: run pytest --update-golden"
        expected = path.read_text()
        assert text == expected, (
            f"{name} differs from the golden file (pytest --update-golden rewrites it)"
        )

    return check


def required() -> set[str]:
    return {s.strip() for s in os.environ.get("CRYPTCOST_REQUIRE", "").split(",") if s.strip()}


def skip_or_fail(what: str | tuple[str, ...], reason: str) -> None:
    """Skip — or fail when CRYPTCOST_REQUIRE names ``what`` (a stack, or a check that is
    no stack: ``root``, ``vm``, ``chromium``, ``pinning``; or any of several). Every skip in
    the tests goes through here (tests/unit/test_packaging.py checks it): CI has no silent
    skips."""
    names = (what,) if isinstance(what, str) else what
    named = [n for n in names if n in required()]
    if named:
        pytest.fail(f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} required here "
                    f"(CRYPTCOST_REQUIRE) but cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture
def fixture_text():
    return lambda name: (TOOLS / name).read_text()


def _release_killed_sessions() -> None:
    """Replay ``cryptcost cleanup`` on the journals of earlier test sessions that were killed
    (a runner stopped mid-test, or at a session's end): their netns, key tmpfs and changed
    workqueue mask would otherwise fail every leftover check of this session, though this code
    did not leave them, and their tmpfs media hold memory a plan checks it has.
    A journal whose run is still alive is left alone by cleanup itself."""
    if os.geteuid() != 0:
        return
    root = os.path.join(tempfile.gettempdir(), f"pytest-of-{pwd.getpwuid(os.getuid()).pw_name}")
    found = glob.glob(os.path.join(root, "pytest-*", "**", "state", "journal-*"), recursive=True)
    states = {os.path.realpath(os.path.dirname(j)) for j in found}
    for state in sorted(states):
        done = subprocess.run(
            [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True,
            env={**os.environ, "CRYPTCOST_STATE_DIR": state}, timeout=600,
        )
        if "nothing to clean up" not in done.stdout:
            print(
                f"released what a killed test session left in {state}:\n{done.stdout}{done.stderr}",
                file=sys.stderr,
            )


if not os.environ.get("PYTEST_XDIST_WORKER"):         # once, in the process that runs the session
    _release_killed_sessions()


# What the safety tests count, printed at the end of every session: signals injected and at
# which points, resources leaked, key bytes found, bad inputs tried, concurrent runs that
# collided. A line appears only once its check has run.
TALLY: collections.Counter = collections.Counter()
POINTS: set[str] = set()
# A run that took far longer than its kind does, with where it waited (its longest quiet spell in
# its -v log): printed at the end of the session, so that a wait seen once is named, not guessed.
SLOW: list[str] = []
# Each guest boot of tests/system/test_vm_matrix.boot_all: its thread, how long it took and how it
# ended, printed at the end of the session, so that the threads' balance is read, not worked out.
BOOTS: list[str] = []


def longest_wait(log: str) -> tuple[float, str]:
    """Where a ``-v`` log (``   1234ms LEVEL name: …``) spent its time: the longest gap between
    two of its lines, in seconds, with the two lines around it; and, where a command repeated
    (a retry loop: many short gaps, none of them long), the command whose lines were followed
    by the most time in all, with how many times it ran."""
    import re
    stamped = [(int(m.group(1)), line.strip()) for line in log.splitlines()
               if (m := re.match(r"\s*(\d+)ms ", line))]
    gaps = [(b[0] - a[0], f"{a[1][:160]} … then, {(b[0] - a[0]) / 1000:.1f} s later: "
             f"{b[1][:160]}") for a, b in zip(stamped, stamped[1:])]
    if not gaps:
        return 0.0, ""
    gap, said = max(gaps)
    spent: dict[str, list[int]] = {}
    for a, b in zip(stamped, stamped[1:]):
        # a command by its program and first operand: "run: umount /tmp/…" whatever its options
        words = re.sub(r"^\s*\d+ms \S+ \S+ ", "", a[1]).split()
        what = " ".join(w for w in words if not w.startswith("-"))[:120]
        spent.setdefault(what, [0, 0])
        spent[what][0] += b[0] - a[0]
        spent[what][1] += 1
    what, (total, times) = max(spent.items(), key=lambda kv: kv[1][0])
    if times > 1 and total > 2 * gap:
        said += f"; in all, {total / 1000:.1f} s after {times} lines of: {what}"
    return gap / 1000, said


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its tally to the controller, which prints it."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["tally"], out["points"] = dict(TALLY), sorted(POINTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", None) or {}
    TALLY.update(out.get("tally", {}))
    POINTS.update(out.get("points", []))


def pytest_terminal_summary(terminalreporter):
    if BOOTS:
        terminalreporter.section("guest boots, two threads")
        for line in BOOTS:
            terminalreporter.line(line)
    if SLOW:
        terminalreporter.section("slow runs, and where each waited")
        for line in SLOW:
            terminalreporter.line(line)
    if not TALLY:
        return
    terminalreporter.section("safety tally")
    for key, count in TALLY.items():
        terminalreporter.line(f"{key}: {count}")
    if POINTS:
        terminalreporter.line(f"points covered: {len(POINTS)} ({', '.join(sorted(POINTS))})")


def _files(*dirs: Path) -> set[str]:
    """Files under ``dirs``; SQLite's transient -wal/-shm companions are not counted."""
    return {str(p) for d in dirs if d.exists() for p in d.rglob("*")
            if not p.name.endswith(("-wal", "-shm"))}


def cli_in(where: Path):
    """The real command line in a subprocess, with its store and state under ``where`` and run
    from there: what the ``cli`` fixture gives a test, for a module's shared fixture too. The
    result carries ``created``: files that appeared in its store and state directories."""

    def run(
        *args: str, env: dict | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "XDG_DATA_HOME": str(where / "data"),
                    "CRYPTCOST_STATE_DIR": str(where / "state"), **(env or {})}
        watched = [where / "data", where / "state"]
        before = _files(*watched)
        done = subprocess.run([sys.executable, "-m", "cryptcost", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout, cwd=where)
        done.created = sorted(_files(*watched) - before)
        return done
    return run


@pytest.fixture
def cli(tmp_path):
    """Run the real command line in a subprocess, isolated store and state, from the test's
    own directory (:func:`cli_in`)."""
    return cli_in(tmp_path)


def assert_bad_input(proc: subprocess.CompletedProcess) -> None:
    """Bad input: one line on stderr starting 'error:', exit code 2, no traceback, nothing
    created."""
    TALLY["bad inputs tried"] += 1
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    assert getattr(proc, "created", []) == [], f"bad input created {proc.created}"


# The memory of CI's machine (24 GiB, nearly all of it available). A plan of a suite checks its
# media fit in half the available memory; a unit test that plans one must not pass or fail with
# what else holds memory on the host at the time (another test's tmpfs, a build, a guest).
CI_MEMORY = {"total": 24 << 30, "available": 23 << 30}
# The command line in a subprocess, as ``python -m cryptcost`` but on CI_MEMORY.
ON_CI_MEMORY = [sys.executable, "-c",
                "import sys; from cryptcost.host import cpu; "
                f"cpu.memory = lambda: {CI_MEMORY!r}; "
                "from cryptcost.cli import main; raise SystemExit(main(sys.argv[1:]))"]


@pytest.fixture
def ci_memory(monkeypatch):
    """In-process: the host's memory reads as CI_MEMORY."""
    from cryptcost.host import cpu
    monkeypatch.setattr(cpu, "memory", lambda: dict(CI_MEMORY))


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("CRYPTCOST_STATE_DIR", str(d))
    return d
