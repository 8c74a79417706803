"""Stacks: one plugin class per file in this package, found automatically.

A stack spec on the command line is ``name`` (its default variants),
``name:variant``, or ``name:*`` (every variant). Adding a stack means adding
one file with a :class:`~cryptcost.stacks.fs.StorageStack` or
:class:`~cryptcost.stacks.net.NetworkStack` subclass that declares its facts
(see :mod:`cryptcost.stacks.base` and docs/adding-a-stack.md). What other
parts of cryptcost need to know of the stacks — the Debian packages, the
stacks CI must run, the docs table — is derived here from the registry.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from cryptcost.errors import CryptcostError, Unavailable, UserError
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import KINDS, Stack, problems

_NOT_PLUGINS = {"base", "fs", "net", "qemu_export"}


@lru_cache(maxsize=1)
def registry() -> dict[str, type[Stack]]:
    """Every stack class by name, baselines first, then by name.

    A plugin whose declaration is incomplete stops cryptcost with a message
    naming the plugin and what it lacks."""
    found: dict[str, type[Stack]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_PLUGINS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, Stack) and not inspect.isabstract(cls)
                    and cls.__module__ == module.__name__ and getattr(cls, "name", None)):
                found[cls.name] = cls
    wrong = {name: problems(cls, set(found)) for name, cls in found.items()}
    wrong = {name: p for name, p in wrong.items() if p}
    if wrong:
        raise CryptcostError("incomplete stack plugin(s): " + "; ".join(
            f"{found[n].__module__} ({n}): {', '.join(p)}" for n, p in sorted(wrong.items())))

    def order(name: str) -> tuple:
        cls = found[name]
        baseline = cls.role == "baseline"
        return (KINDS.index(cls.kind), not baseline, len(cls.baselines) if baseline else 0, name)
    return {n: found[n] for n in sorted(found, key=order)}


def of_kind(kind: str | None) -> dict[str, type[Stack]]:
    """The registry restricted to ``storage`` or ``network`` stacks (None: all)."""
    return {n: c for n, c in registry().items() if kind is None or c.kind == kind}


def in_suite(suite: str, kind: str, *, default_variants: bool = False) -> list[str]:
    """The specs of the measured stacks of ``kind`` whose facts (``suites``) put them in ``suite``:
    ``name`` for their default variants, ``name:*`` for every one (``default_variants``: never)."""
    return [name + (":*" if how == "*" and not default_variants else "")
            for name, cls in of_kind(kind).items()
            if cls.role == "measured"
            and (how := getattr(cls, "suites", {}).get(suite)) is not None]


def get(name: str, kind: str | None = None) -> type[Stack]:
    stacks = of_kind(kind)
    if name not in stacks:
        if kind and name in registry():
            raise UserError(f"{name} is a {registry()[name].kind} stack, not a {kind} stack; "
                            f"choose from {', '.join(stacks)}")
        raise UserError(f"unknown stack {name!r}; choose from {', '.join(stacks)}")
    return stacks[name]


def parse_spec(spec: str, kind: str | None = None) -> list[tuple[type[Stack], str]]:
    """``gocryptfs`` → its default variants; ``gocryptfs:xchacha``; ``gocryptfs:*``."""
    name, _, variant = spec.partition(":")
    cls = get(name, kind)
    if not variant:
        return [(cls, v) for v in cls.default_variants]
    if variant == "*":
        return [(cls, v) for v in cls.variants]
    if variant not in cls.variants:
        raise UserError(f"stack {name} has no variant {variant!r}; choose from "
                        f"{', '.join(cls.variants)}")
    return [(cls, variant)]


def unavailable_reason(cls: type[Stack]) -> Unavailable | None:
    try:
        cls.require()
    except Unavailable as exc:
        return exc
    return None


def availability(kind: str | None = None) -> list[dict]:
    """Each stack: available or not, why, and how to get it (probe's contract)."""
    out = []
    for name, cls in of_kind(kind).items():
        exc = unavailable_reason(cls)
        out.append({"name": name, "kind": cls.kind, "layer": cls.layer, "role": cls.role,
                    "use_case": cls.use_case, "available": exc is None,
                    "reason": exc.reason if exc else None, "install": exc.install if exc else None,
                    "variants": list(cls.variants),
                    "baseline": cls.baselines[0] if cls.baselines else None,
                    "description": cls.description})
    return out


def stack_tools() -> list[Tool]:
    """Every program a stack needs, once each."""
    seen: dict[str, Tool] = {}
    for cls in registry().values():
        for t in cls.needed_tools():
            seen.setdefault(t.name, t)
    return list(seen.values())


def packages() -> dict[str, set[str]]:
    """Debian package → the stacks that need it."""
    out: dict[str, set[str]] = {}
    for name, cls in registry().items():
        for t in cls.needed_tools():
            out.setdefault(t.package, set()).add(name)
    return out


def expected_on(features: set[str], installable: set[str]) -> list[str]:
    """The stacks that must run on a host whose kernel has ``features`` and
    where ``installable`` Debian packages are installed (CI's required list)."""
    return [name for name, cls in registry().items()
            if set(cls.features) <= features and all(t.package in installable
                                                     for t in cls.needed_tools())]


def markdown_table() -> str:
    """docs/stacks.md's table: one row per stack, from the declarations."""
    rows = ["| stack | kind | layer | role | use case | compared with | variants | needs |",
            "|---|---|---|---|---|---|---|---|"]
    for name, cls in registry().items():
        needs = (sorted({t.package for t in cls.needed_tools()})
                 + [f"kernel: {f}" for f in cls.features])
        variants = ", ".join(f"`{v}`" + (" (baseline)" if v in cls.baseline_variants else "")
                             for v in cls.variants)
        rows.append(f"| `{name}` | {cls.kind} | {cls.layer} | {cls.role} | {cls.use_case or '—'} | "
                    f"{', '.join(f'`{b}`' for b in cls.baselines) or '—'} | {variants} | "
                    f"{', '.join(needs)} |")
    return "\n".join(rows) + "\n"
