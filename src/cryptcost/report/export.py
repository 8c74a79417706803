"""Exporters: pure functions from a stored run to text, one per format."""

from __future__ import annotations

import csv
import io
import json

from cryptcost.model import Run, as_json
from cryptcost.store.exchange import run_dict

def to_json(run: Run, results: list[dict], doc: dict | None = None) -> str:
    """The run, its results and (when given) the analysed report document."""
    data = run_dict(run, results)
    if doc is not None:
        data["analysis"] = {k: getattr(doc, k) for k in (
            "answer", "recommendations", "ranking", "findings", "tuning", "predictions", "target",
            "scaling", "field_reports")}
        # reference → twin → stack
        data["analysis"]["split"] = [x.figures for x in doc.split]
        data["analysis"]["bottlenecks"] = [{"stack": r.stack, "workload": r.workload,
                                            "op": getattr(r, "op", r.workload),
                                            "block": getattr(r, "block", ""),
                                            "bottleneck": r.bottleneck,
                                            "explanation": r.explanation,
                                            **({"layers": r.layers} if r.layers else {})}
                                           for r in doc.storage + doc.network
                                           if r.bottleneck]
    return dumps(data)


def dumps(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=as_json) + "\n"


def _flat(value) -> str:
    if isinstance(value, (list, tuple)):
        return ";".join(_flat(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def to_csv(run: Run, results: list[dict]) -> str:
    """One row per result; lists joined with ';', nested objects as JSON."""
    return to_csv_many([(run, results, None)])


def to_csv_many(runs: list[tuple[Run, list[dict], str | None]]) -> str:
    """The rows of several runs in one table, each with its run (and, for a fleet, the column
    that holds it: ``member``)."""
    named = any(label for _, _, label in runs)
    columns: list[str] = ["run"] + (["member"] if named else [])
    fixed = len(columns)
    for _, results, _ in runs:
        for r in results:
            for key in r:
                if key not in columns:
                    columns.append(key)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for run, results, label in runs:
        for r in results:
            writer.writerow([run.id] + ([label] if named else [])
                            + [_flat(r.get(c)) for c in columns[fixed:]])
    return buf.getvalue()
