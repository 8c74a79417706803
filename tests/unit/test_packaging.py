"""Install list and tool registry agree; every stack says how to get it."""

from pathlib import Path

from cryptcost.host.tools import TOOLS
from cryptcost.stacks import registry

ROOT = Path(__file__).resolve().parents[2]


def test_every_tool_package_is_installed_by_make():
    listed = {l.strip() for l in (ROOT / "packaging/debian-packages.txt").read_text().splitlines()
              if l.strip() and not l.startswith("#")}
    not_in_main = {"zfs"}             # Debian contrib, needs a kernel module build: named, not installed
    missing = {t.name: t.package for t in TOOLS.values()
               if t.name not in not_in_main and t.package not in listed}
    assert missing == {}


def test_every_stack_is_one_documented_plugin():
    for name, cls in registry().items():
        assert cls.__doc__ or (cls.__module__ and __import__(cls.__module__, fromlist=["x"]).__doc__), name
        assert cls.description, name
        assert set(cls.default_variants) <= set(cls.variants), name
        for t in cls.tools:
            assert t in TOOLS, f"{name} needs unknown tool {t}"
