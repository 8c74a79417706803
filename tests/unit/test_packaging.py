"""What make installs (``cryptcost install``'s needs), what CI requires and what docs/stacks.md
lists are derived from (or checked against) the stack registry."""

import os
import re
from pathlib import Path

from cryptcost import stacks
from cryptcost.host.tools import TOOLS
from cryptcost.suite import needs

ROOT = Path(__file__).resolve().parents[2]
NOT_IN_MAIN = {
    "zfsutils-linux (contrib, with zfs-dkms)"
}  # named, not installed: needs a module build
# What the CI machine's kernel has (the brief): FUSE, loop devices, ext4 with fscrypt, netns, veth,
# TUN.
CI_KERNEL = {"fuse", "loop", "fscrypt", "netns", "veth", "tun"}
# required checks that are not stacks: root itself, the browser, the guest, the workqueue cpumask,
# perf, the peer, ZFS in the guest
CI_EXTRAS = {"root", "chromium", "vm", "pinning", "profile", "peer", "vm-zfs", "bonnie"}


def listed_packages() -> set[str]:
    """Every package ``make test`` installs (``cryptcost install tests``)."""
    return {p for need in needs.resolve(["tests"]) for p in need.packages | need.contrib}


def built_by_make() -> set[str]:
    """Tools whose 'package' says make builds them (from a pinned module in packaging/)."""
    return {p for p in stacks.packages() if p.startswith("make:")}


def ci_required() -> set[str]:
    text = (ROOT / ".ci/run").read_text()
    match = re.search(r'CRYPTCOST_REQUIRE:-([^}"]+)', text)
    return set(match.group(1).split(","))


def test_every_tool_package_is_installed_by_make():
    wanted = {t.package for t in TOOLS.values()} | set(stacks.packages())
    assert wanted - NOT_IN_MAIN - built_by_make() - listed_packages() == set()


def test_every_tool_make_builds_is_built_by_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    for name, cls in stacks.registry().items():
        for t in cls.needed_tools():
            if t.package.startswith("make:"):
                assert Path(t.binary).name in makefile, (
                    f"{name}: the Makefile does not build {t.binary}"
                )
                assert (
                    "deps:" in makefile and "gofuse" in makefile.split("deps:")[1].splitlines()[0]
                )


def test_what_make_builds_says_the_version_of_the_module_it_was_built_from():
    """The loopback prints no version of its own: its results carry the go-fuse version of its
    build record, the one packaging/gofuse pins (they read a dpkg error's words once)."""
    from cryptcost.host import tools
    from cryptcost.stacks.gofuse_passthrough import LOOPBACK
    from tests.conftest import skip_or_fail
    if not LOOPBACK.path():
        skip_or_fail("gofuse-passthrough", f"{LOOPBACK.binary} is not built (make gofuse)")
    pinned = re.search(r"github\.com/hanwen/go-fuse/v2 v(\S+)",
                       (ROOT / "packaging/gofuse/go.mod").read_text())
    tools.forget()
    try:
        assert pinned and tools.version(LOOPBACK) == pinned.group(1)
    finally:
        tools.forget()


def test_ci_requires_every_stack_this_kind_of_machine_can_run():
    expected = set(stacks.expected_on(CI_KERNEL, listed_packages() | built_by_make()))
    required = ci_required()
    assert expected - required == set(), "stacks CI must require (add them to .ci/run)"
    assert required - expected - CI_EXTRAS == set(), "names in .ci/run that are no stack CI can run"


def test_docs_table_is_the_registry():
    text = (ROOT / "docs/stacks.md").read_text()
    assert stacks.markdown_table() in text, (
        "docs/stacks.md's table is stale: paste stacks.markdown_table()"
    )


def test_every_stack_is_one_documented_plugin():
    for name, cls in stacks.registry().items():
        assert cls.__doc__ or __import__(cls.__module__, fromlist=["x"]).__doc__, name
        assert cls.description, name
        assert set(cls.default_variants) <= set(cls.variants), name
        assert all(t.package for t in cls.needed_tools()), name


SKIPS = re.compile(r"pytest\.skip\(|importorskip|mark\.skip|skipif")


def test_every_skip_in_the_tests_goes_through_skip_or_fail():
    """So that CRYPTCOST_REQUIRE turns every skip that matters into a failure (CI): no
    ``pytest.skip``, ``importorskip`` or skip marker anywhere but skip_or_fail itself."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SKIPS.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert [f.split(":")[0] for f in found] == ["tests/conftest.py"], "\n".join(found)
    assert found[0].endswith("pytest.skip(reason)")


def test_make_builds_a_man_page_that_shows_every_subcommand(tmp_path):
    """cryptcost(1), made by the Makefile's own rule from the argument parser, rendered by man."""
    import shutil
    import subprocess
    from cryptcost.cli import build_parser
    page = tmp_path / "man1" / "cryptcost.1"
    done = subprocess.run(
        ["make", "-s", "man", f"MANPAGE={page}"], cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )
    assert done.returncode == 0 and page.is_file(), done.stderr[-2000:]
    text = page.read_text()
    if shutil.which("man"):
        text = subprocess.run(
            ["man", "-l", str(page)], capture_output=True, text=True, timeout=60,
            env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""},
        ).stdout
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"cryptcost {name}" in text, name
    assert "what encryption costs on this machine" in text
