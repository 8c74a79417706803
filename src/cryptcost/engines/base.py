"""Cipher engines: wrapped programs that measure raw cipher throughput.

A :class:`CipherEngine` turns a list of :class:`Cell` (engine × algorithm ×
buffer × threads × accel) into :class:`~cryptcost.model.Job`
objects. One job is one invocation of the program; it may yield samples for
several cells at once (``gocryptfs -speed`` measures all its ciphers in one
go). The scheduler repeats jobs, interleaved, until each cell is stable.

Call order: ``require()`` (raises :class:`~cryptcost.errors.Unavailable`),
then ``unsupported(cell)`` per cell, then ``jobs(cells, seconds)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from cryptcost.host import tools
from cryptcost.model import Cell, Job

# The buffer sizes a cipher table can sweep: a sector (512 B) up to 1 MiB.
ALL_SIZES = (512, 1024, 4096, 16384, 65536, 1048576)


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as cryptcost names it, and what the engine needs to run it.

    ``hw`` names the CPU flags whose hardware path acceleration-off removes
    (empty: there is none, so on/off cannot differ). ``warning`` is the
    security fact a recommendation must repeat.
    """

    name: str
    arg: str                    # the engine's own name for it
    family: str                 # cipher, aead, mac
    hw: tuple[str, ...] = ()
    warning: str | None = None


class CipherEngine(ABC):
    """One wrapped cipher benchmark program. See the module docstring."""

    name: ClassVar[str]
    tool: ClassVar[str]
    algorithms: ClassVar[dict[str, Algorithm]]
    sizes: ClassVar[tuple[int, ...] | None] = None      # None: any buffer size
    max_threads: ClassVar[int | None] = None            # None: any thread count

    def require(self) -> None:
        """Raise :class:`~cryptcost.errors.Unavailable` when the engine cannot run."""
        tools.tool(self.tool).require()

    def version(self) -> str | None:
        return tools.version(self.tool)

    def unsupported(self, cell: Cell) -> str | None:
        """Why ``cell`` cannot be measured by this engine, or None."""
        if cell.algorithm not in self.algorithms:
            return f"{self.name} engine has no {cell.algorithm}"
        if self.sizes is not None and cell.buffer_bytes not in self.sizes:
            shown = ", ".join(str(s) for s in self.sizes)
            return f"{self.name} engine measures only {shown}-byte buffers"
        if self.max_threads is not None and cell.threads > self.max_threads:
            return f"{self.name} engine runs only {self.max_threads} thread(s)"
        return None

    @abstractmethod
    def jobs(self, cells: list[Cell], seconds: int) -> list[Job]:
        """Group ``cells`` into invocations; each job measures its cells once."""
