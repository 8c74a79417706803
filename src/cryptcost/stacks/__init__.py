"""Stacks: one plugin class per file in this package, found automatically.

A stack spec on the command line is ``name`` (its default variants),
``name:variant``, or ``name:*`` (every variant). Adding a stack means adding
one file with a :class:`~cryptcost.stacks.base.Stack` subclass.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from cryptcost.errors import Unavailable, UserError
from cryptcost.stacks.base import Stack

_NOT_PLUGINS = {"base", "qemu_export"}


@lru_cache(maxsize=1)
def registry() -> dict[str, type[Stack]]:
    """Every stack class by name, in a stable order (baselines first)."""
    found: dict[str, type[Stack]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_PLUGINS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Stack) and not inspect.isabstract(cls) and cls.__module__ == module.__name__ \
                    and getattr(cls, "name", None):
                found[cls.name] = cls
    order = ["plain", "fuse-passthrough", "qemu-raw"]
    return {n: found[n] for n in sorted(found, key=lambda n: (order.index(n) if n in order else 99, n))}


def get(name: str) -> type[Stack]:
    stacks = registry()
    if name not in stacks:
        raise UserError(f"unknown stack {name!r}; choose from {', '.join(stacks)}")
    return stacks[name]


def parse_spec(spec: str) -> list[tuple[type[Stack], str]]:
    """``gocryptfs`` → its default variants; ``gocryptfs:xchacha``; ``gocryptfs:*``."""
    name, _, variant = spec.partition(":")
    cls = get(name)
    if not variant:
        return [(cls, v) for v in cls.default_variants]
    if variant == "*":
        return [(cls, v) for v in cls.variants]
    if variant not in cls.variants:
        raise UserError(f"stack {name} has no variant {variant!r}; choose from {', '.join(cls.variants)}")
    return [(cls, variant)]


def unavailable_reason(cls: type[Stack]) -> Unavailable | None:
    try:
        cls.check()
    except Unavailable as exc:
        return exc
    return None


def availability() -> list[dict]:
    """Each stack: available or not, why, and how to get it (probe's contract)."""
    out = []
    for name, cls in registry().items():
        exc = unavailable_reason(cls)
        out.append({"name": name, "kind": cls.kind, "available": exc is None,
                    "reason": exc.reason if exc else None, "install": exc.install if exc else None,
                    "variants": list(cls.variants), "baseline": cls.baseline,
                    "description": cls.description})
    return out
