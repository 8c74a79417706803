"""Why a field report's row has no figure in a run: what the run's record says it left out.

A stack it could not run, or a cut of the report's own part (its label among the part's) to fit
``--time-budget``, in this host's share or a guest's (``suite.budget``): the whole part (only
the rows of the stacks it names: a guest's share of a part measures this host's missing ones),
every stack of a kind, or one value of a table's dimension (``storage workloads bonnie``).
"""

from __future__ import annotations

from cryptcost.workloads.seeds import reports_of

# a budget's cut of a table's values ("storage workloads bonnie"): the cell dimension it cuts
_CUT_DIMS = {"workloads": "workload", "accel": "accel", "cpus": "cpus", "threads": "threads",
             "sizes": "buffer_bytes"}


def _cut_names(cut: dict, what: str, want: dict) -> bool:
    """Whether a budget's ``cut`` of ``what`` (the whole part, every stack of a kind, or one
    value of a table's dimension) takes away a cell with ``want``'s dimensions."""
    if what == "the whole part":       # where the cut says what the part measured, by that
        if want.get("kind") == "cipher" or "engine" in want:
            return bool(cut.get("ciphers", True))
        stacks = cut.get("stacks") or ["all"]
        if want.get("stack") and "all" not in stacks and \
                not any(names_stack(s, str(want["stack"])) for s in stacks):
            return False
        blocks = cut.get("block_bytes")          # recorded since 2026-11-30
        if blocks and want.get("block_bytes") is not None \
                and want["block_bytes"] not in blocks:
            return False
        return "workload" not in want or want["workload"] in cut.get("workloads",
                                                                     [want["workload"]])
    words = what.split()
    if what.startswith("every ") and len(words) == 3:           # every network stack
        return want.get("kind") in (None, words[1])
    if len(words) != 3 or words[1] not in _CUT_DIMS:
        return False
    kind, dim, value = words[0], _CUT_DIMS[words[1]], words[2]
    if kind != want.get("kind", kind) or dim not in want:
        return False
    got = want[dim]
    return (got is (value == "on")) if dim == "accel" else str(got) == value


def names_stack(what: str, stack: str) -> bool:
    """Whether what a run could not run (``luks``, ``esp:*``, ``nfs:v3``) is the stack a result
    is labelled ``stack`` (``luks:aes-xts-plain64/accel-off``): that variant, or any variant of
    a bare name or of ``name:*``."""
    want, label = what.removesuffix(":*"), stack.split("/")[0]
    return label == want or (":" not in want and label.split(":")[0] == want)


def left_out(label: str, wants: list[dict], skipped: list[dict]) -> str | None:
    """Why the run has no result for ``wants``, where its record says, every reason once: a
    stack it could not run (here, or in its guest), and a cut of the report's own part
    (``label`` among its part's labels) to fit its time budget, here or in a guest's share."""
    said: list[str] = []
    for s in skipped:
        what = str(s.get("stack") or s.get("what") or "")
        ours = label in reports_of(str(s.get("part") or ""))
        for want in wants:
            stack = want.get("stack")
            if stack and not s.get("budget") and names_stack(what, str(stack)):
                why = f"{what}: {s['reason']}"
            elif s.get("budget") and (ours or what.startswith("samples")) \
                    and _cut_names(s, what, want):
                why = f"{s.get('part')}: {what}: {s['reason']}"
            else:
                continue
            if why not in said:
                said.append(why)
    return "; ".join(said) or None
