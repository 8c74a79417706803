"""Shared fixtures. Tests that need root and real kernel features are marked
``root``; they skip elsewhere — unless ``CRYPTCOST_REQUIRE`` names the stack,
in which case a skip is a failure (CI sets it)."""

from __future__ import annotations

import os
import subprocess
import sys
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
        assert text == expected, f"{name} differs from the golden file (pytest --update-golden rewrites it)"
    return check


def required() -> set[str]:
    return {s.strip() for s in os.environ.get("CRYPTCOST_REQUIRE", "").split(",") if s.strip()}


def skip_or_fail(what: str, reason: str) -> None:
    """Skip — or fail when CRYPTCOST_REQUIRE names ``what`` (CI: no silent skips)."""
    if what in required():
        pytest.fail(f"{what} is required here (CRYPTCOST_REQUIRE) but cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture
def fixture_text():
    return lambda name: (TOOLS / name).read_text()


@pytest.fixture
def cli(tmp_path):
    """Run the real command line in a subprocess, isolated store and state."""
    def run(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
                    "CRYPTCOST_STATE_DIR": str(tmp_path / "state"), **(env or {})}
        return subprocess.run([sys.executable, "-m", "cryptcost", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout)
    return run


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("CRYPTCOST_STATE_DIR", str(d))
    return d
