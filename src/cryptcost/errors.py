"""The exception hierarchy. One root, caught once in :func:`cryptcost.cli.main`.

* :class:`UserError` — bad input or a missing prerequisite the user can fix;
  exit code 2.
* :class:`Unavailable` — a stack or engine cannot run on this host; carries
  the reason and how to get it. A ``UserError`` when the user asked for it.
* :class:`ProcessError` — an external program failed; carries its output;
  exit code 1.
"""

from __future__ import annotations


class CryptcostError(Exception):
    """Root of every error cryptcost raises on purpose. Exit code 1."""

    exit_code = 1


class UserError(CryptcostError):
    """The user can fix this: bad flag, bad plan, not root, missing tool."""

    exit_code = 2


class Unavailable(UserError):
    """A stack or engine cannot run here.

    ``reason`` says what is missing, ``install`` how to get it (a Debian
    package name or a kernel option), or ``None`` when nothing can be
    installed to fix it. ``guest``: where Debian's stock kernel has what is
    missing, the kernel ``cryptcost vm --kernel`` needs for it (``""``: the
    stock one), else ``None``.
    """

    def __init__(self, reason: str, install: str | None = None, guest: str | None = None):
        self.reason = reason
        self.install = install
        self.guest = guest
        text = reason if not install else f"{reason} (install: {install})"
        super().__init__(text)


class ProcessError(CryptcostError):
    """An external program exited non-zero, timed out or could not start."""

    def __init__(self, argv: list[str], returncode: int | None, stdout: str, stderr: str,
                 why: str = "", reason: str = ""):
        """``reason``: the program's own words for what went wrong, where
        its caller found them (else the last line of stderr, or of stdout)."""
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        lines = [ln for ln in (stderr.strip() or stdout.strip()).splitlines()
                 if ln.strip() and not ln.strip().startswith("dmesg(1) may have more information")]
        last = reason or (lines[-1:] or [""])[0]
        what = why or f"exit code {returncode}"
        super().__init__(f"{argv[0]} failed ({what}): {last[:300]}")


class DataIntegrityError(CryptcostError):
    """A stack returned different bytes than were written, or moved fewer."""
