"""Where samples and results go the moment they exist.

The base :class:`Sink` discards; :class:`StoreSink` writes to the result
store, so that a run that fails later keeps everything measured before.
"""

from __future__ import annotations

from cryptcost.model import Cell, Result, Sample
from cryptcost.runner.core.scheduler import Series


class Sink:
    """Receives every sample and every result as soon as it exists."""

    def sample(self, cell: Cell, index: int, sample: Sample) -> None: ...

    def result(self, result: Result) -> None: ...


class StoreSink(Sink):
    """Saves into a :class:`~cryptcost.store.db.Store` under one run id."""

    def __init__(self, store, run_id: int):
        self.store = store
        self.run_id = run_id

    def sample(self, cell: Cell, index: int, sample: Sample) -> None:
        self.store.add_sample(self.run_id, cell, index, sample)

    def result(self, result: Result) -> None:
        self.store.add_result(self.run_id, result)


class Seen(Sink):
    """Hands every sample on to ``sink`` and keeps it by series (``series``): what a
    comparison cut short still has to make its results from."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.series: dict[Cell, Series] = {}

    def sample(self, cell: Cell, index: int, sample: Sample) -> None:
        self.sink.sample(cell, index, sample)
        self.series.setdefault(cell, Series()).samples.append(sample)
