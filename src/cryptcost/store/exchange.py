"""A stored run as one JSON-able object, the form runs travel in between stores: what ``cryptcost
export`` writes, a baseline file holds, and a guest's runs are imported from."""

from __future__ import annotations

from cryptcost.model import Run

EXPORT_VERSION = 1


def run_dict(run: Run, results: list[dict]) -> dict:
    """A run and its results as one JSON-able object."""
    return {"format": "cryptcost-run", "version": EXPORT_VERSION,
            "run": {"id": run.id, "started": run.started, "finished": run.finished,
                    "command": run.command, "status": run.status, "label": run.label,
                    "extra": run.extra},
            "host": run.host, "results": results}
