"""A plan is compiled once into a frozen, typed record that every later step reads: each
default declared once (where its field is) and documented, nothing in it changed by a run, and
the guest's file compiled there to the same record."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from cryptcost.runner.ciphers.executor import FakeExecutor
from cryptcost.runner.core.sink import Sink
from cryptcost.suite import run_plan
from cryptcost.suite.compiled import (CompiledPlan, compile_plan, policy_table, storage_plans,
                                      tables_of)
from cryptcost.suite.guest import from_json, to_json
from cryptcost.workloads.plan import SCHEMA, SUITES, Part, RunPlan, load

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plans.md"
KINDS = ("ciphers", "storage", "network", "policy")


def _documented() -> dict[str, object]:
    """docs/plans.md's table of defaults: key → its default, as JSON."""
    rows = re.findall(r"^\| `(\w+\.\w+)` \| `([^`]*)` \|", DOCS.read_text(), re.M)
    return {key: json.loads(value) for key, value in rows}


def test_an_empty_table_compiles_to_the_documented_defaults():
    """Every key of every table a plan may have is documented, and an empty table compiles to
    what the documentation says (so the default is written once, where its field is)."""
    plan, notes = compile_plan(RunPlan("empty", parts=[Part("p", ciphers={}, storage={},
                                                            network={})]))
    [part] = plan.parts
    got = {**tables_of(part), "policy": policy_table(plan.policy)}
    documented = _documented()
    keys = {f"{kind}.{key}" for kind in KINDS for key in SCHEMA[kind]}
    assert set(documented) == keys
    for kind in KINDS:
        for key in SCHEMA[kind]:
            assert got[kind].get(key) == documented[f"{kind}.{key}"], f"{kind}.{key}"
    assert part.policy == plan.policy and not notes
    # a table's key given replaces its default, and nothing else
    [sp] = storage_plans({"fs": "xfs", "size": "1G"})
    assert (sp.fs, sp.size, sp.workloads, sp.sized().medium) == ("xfs", 1 << 30, ("quick",),
                                                                 1 << 30)


def test_a_compiled_plan_is_immutable_and_a_run_changes_nothing_in_it():
    plan, _ = compile_plan(load("quick", None))
    part = plan.parts[0]
    for obj, name in ((plan, "name"), (part, "label"), (part.ciphers, "sizes"),
                      (part.storage[0], "size"), (part.network[0], "link"),
                      (part.policy, "warmup")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
    assert isinstance(plan.parts, tuple) and isinstance(part.storage, tuple)
    assert isinstance(part.storage[0].stacks, tuple) and isinstance(plan.cannot_run, tuple)
    # a run of a cipher plan (the fake engine) leaves the record as it was
    ciphers, _ = compile_plan(RunPlan("c", parts=[Part("c", ciphers={
        "engines": ["openssl"], "algorithms": ["aes-256-gcm"], "sizes": [4096]})],
        policy={"min_samples": 2, "max_samples": 2, "warmup": 0}))
    before = repr(ciphers)
    run_plan(ciphers, sink=Sink(), host={"cpu": {"flags": ["aes"], "cores": 2}},
             executor=FakeExecutor())
    assert repr(ciphers) == before


@pytest.mark.parametrize("suite", SUITES)
def test_every_suite_reaches_the_guest_as_the_same_compiled_plan(suite):
    """The guest's file is written from the compiled record and compiled there again: the same
    tables, policies and scales."""
    plan, _ = compile_plan(load(suite, None))
    back, _ = compile_plan(from_json(to_json(plan), "parts.json"))
    assert isinstance(back, CompiledPlan) and back.policy == plan.policy
    assert [(p.label, tables_of(p), p.policy, p.keep, p.scale) for p in back.parts] == \
        [(p.label, tables_of(p), p.policy, p.keep, p.scale) for p in plan.parts]


@pytest.mark.parametrize("spec", ["ram", "dir:/scratch", "throttled:200MB/s", "device:/dev/sdz"])
def test_a_medium_is_written_back_as_its_table_names_it(spec):
    """The guest's file and run --dry-run --json name each storage table's medium as the plan
    did, whatever kind it is."""
    [sp] = storage_plans({"medium": spec})
    assert tables_of(compile_plan(RunPlan("m", parts=[Part("p", storage={"medium": spec})]))[0]
                     .parts[0])["storage"]["medium"] == sp.medium.spec == spec
