"""Executors turn cells into jobs: the real one runs engines; the fake one
returns deterministic synthetic samples, so that scheduling, statistics,
the store and reports can be tested fast and without root.

The fake never stands in for a real stack test: tests that claim a stack
works run it through :class:`RealExecutor`.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Callable

from cryptcost.engines import CIPHER_ENGINES
from cryptcost.model import Cell
from cryptcost.model import Sample
from cryptcost.model import Job


class Executor(ABC):
    """Builds the jobs that measure cells."""

    @abstractmethod
    def cipher_jobs(self, engine: str, cells: list[Cell], seconds: int) -> list[Job]:
        """Jobs measuring raw-cipher ``cells`` of ``engine``."""

    @abstractmethod
    def require_engine(self, engine: str) -> None:
        """Raise :class:`~cryptcost.errors.Unavailable` if ``engine`` cannot run."""

    def unsupported(self, cell: Cell) -> str | None:
        return CIPHER_ENGINES[cell.engine]().unsupported(cell)


class RealExecutor(Executor):
    """Runs the real programs."""

    def cipher_jobs(self, engine: str, cells: list[Cell], seconds: int) -> list[Job]:
        return CIPHER_ENGINES[engine]().jobs(cells, seconds)

    def require_engine(self, engine: str) -> None:
        CIPHER_ENGINES[engine]().require()


def default_rate(cell: Cell) -> float:
    """A plausible synthetic cipher speed: faster with acceleration, bigger
    buffers and more threads. Only for tests of everything *around* a
    measurement."""
    base = 4e9 if cell.accel else 5e8
    size_factor = cell.buffer_bytes / (cell.buffer_bytes + 256)
    return base * size_factor * cell.threads


class FakeExecutor(Executor):
    """Synthetic samples with seeded noise; records the order of calls."""

    def __init__(self, rate: Callable[[Cell], float] = default_rate, noise: float = 0.01,
                 seed: int = 0, unavailable: dict[str, Exception] | None = None):
        self.rate = rate
        self.noise = noise
        self.random = random.Random(seed)
        self.calls: list[str] = []
        self.unavailable = unavailable or {}

    def require_engine(self, engine: str) -> None:
        if engine in self.unavailable:
            raise self.unavailable[engine]

    def cipher_jobs(self, engine: str, cells: list[Cell], seconds: int) -> list[Job]:
        def measure(cell: Cell) -> dict[Cell, Sample]:
            self.calls.append(f"{cell.algorithm}/{cell.buffer_bytes}/{cell.threads}/{cell.accel}")
            value = self.rate(cell) * (1 + self.random.gauss(0, self.noise))
            return {cell: Sample(value=value, seconds=float(seconds))}
        return [Job(label=f"fake {c.algorithm}", keys=(c,), measure=lambda c=c: measure(c),
                    est_seconds=0.0) for c in cells]
