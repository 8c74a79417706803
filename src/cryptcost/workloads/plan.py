"""Run plans: what ``cryptcost run`` measures, as a TOML file or a built-in suite.

A plan has up to five tables; every key is optional::

    [run]      label = "nas-2026"                 suite = "quick"   (a base to start from)
    [ciphers]  engines, algorithms, sizes, threads, accel = ["on", "off"], seconds
    [storage]  stacks, medium, workloads, size = "512M", fs, cpus = [1, 2],
               accel = ["on", "off"], profile, fit_size
    [network]  stacks, link = "netns" (or "peer:HOST", with ssh_config, peer_sudo,
               peer_command), mtu = 1500, delay_ms = 20 (netns), workloads, streams, seconds,
               file_size, accel, cpus, profile
    [policy]   min_samples, max_samples, ci_target (percent), warmup
    [model]    device_speed = "3GB/s", link = "1GbE"

``ciphers = false``, ``storage = false`` or ``network = false`` (top level)
leaves a part out.
Built-in suites are plans too, checked by the same :func:`validate`; a
mistake gives one line naming the key and the allowed values.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptcost.engines import CIPHER_ENGINES
from cryptcost.errors import UserError
from cryptcost.stats import Policy
from cryptcost.units import target_of
from cryptcost.engines.base import ALL_SIZES
from cryptcost.stacks import in_suite, parse_spec
from cryptcost.stacks.fs import FILESYSTEMS
from cryptcost.workloads import network as netwl
from cryptcost.workloads.seeds import ACCEL_CORES, reports_of, seeds_plans
from cryptcost.workloads.storage import SETS, WORKLOADS

SUITES = ("quick", "standard", "seeds", "full")
_ALGOS = sorted({a for e in CIPHER_ENGINES.values() for a in e.algorithms})

# What --time-budget thins in each part, in this order (suite.budget): more rows before
# comparisons, as a ratio (acceleration on against off, two CPUs against one) is what carries
# across hardware. A part's [run] keep names what it thins after all the others (R5's
# directions), though still before a later part goes whole.
THINNED = ("ciphers.sizes", "ciphers.threads", "network.workloads", "storage.workloads",
           "network.clients", "network.cpus", "storage.cpus", "ciphers.accel", "network.accel",
           "storage.accel")

# key → (type, allowed values or None). Types: str, int, float, bool, list[str], list[int], size.
SCHEMA: dict[str, dict[str, tuple]] = {
    "run": {"label": ("str", None), "suite": ("str", SUITES), "keep": ("list[str]", THINNED)},
    "ciphers": {"engines": ("list[str]", tuple(CIPHER_ENGINES)),
                "algorithms": ("list[str]", tuple(_ALGOS)),
                "sizes": ("list[int]", None), "threads": ("list[int]", None),
                "accel": ("list[str]", ("on", "off")), "seconds": ("int", None)},
    "storage": {"stacks": ("list[str]", None), "medium": ("str", None),
                "workloads": ("list[str]", tuple(WORKLOADS) + tuple(SETS)),
                "size": ("size", None), "fs": ("str", FILESYSTEMS), "cpus": ("list[int]", None),
                "seq_cap": ("size", None), "ops_cap": ("int", None), "small_files": ("int", None),
                "accel": ("list[str]", ("on", "off")), "profile": ("bool", None),
                "fit_size": ("bool", None), "sample_minimum": ("float", None),
                "samples": ("int", None)},
    "network": {"stacks": ("list[str]", None), "link": ("str", None),
                "ssh_config": ("str", None), "peer_sudo": ("bool", None),
                "peer_command": ("str", None),
                "mtu": ("int", None), "delay_ms": ("float", None),
                "workloads": ("list[str]", tuple(netwl.WORKLOADS) + tuple(netwl.SETS)),
                "streams": ("int", None), "clients": ("list[int]", None),
                "seconds": ("int", None), "file_size": ("size", None),
                "accel": ("list[str]", ("on", "off")),
                "cpus": ("list[int]", None), "profile": ("bool", None)},
    "policy": {"min_samples": ("int", None), "max_samples": ("int", None),
               "ci_target": ("float", None),
               "warmup": ("int", None)},
    "model": {"device_speed": ("str", None), "link": ("str", None)},
}
TOP = tuple(SCHEMA)



@dataclass
class Part:
    """One matrix of a run: a cipher table, a storage and/or a network comparison."""

    label: str
    ciphers: dict | None = None
    storage: dict | None = None
    network: dict | None = None
    keep: tuple[str, ...] = ()            # what a time budget thins last (THINNED's names)
    # what the model's estimate of this part is multiplied by for the time it takes here (earlier
    # runs' measured/estimated for this part; None: the run's own factor)
    scale: float | None = None
    # the part's own sampling, over the plan's [policy] (a --parts file's: one boot of the guest
    # serving parts that sample differently)
    policy: dict = field(default_factory=dict)

    def empty(self) -> bool:
        return self.ciphers is None and self.storage is None and self.network is None


@dataclass
class RunPlan:
    """A validated plan as loaded, its tables as written: its parts, the repetition policy, the
    cost model, and what this host cannot run (with reasons). ``suite.compiled`` compiles it
    into the frozen record every later step reads."""

    name: str
    label: str | None = None
    parts: list[Part] = field(default_factory=list)
    policy: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)
    cannot_run: list[dict] = field(default_factory=list)


def _type_ok(type_: str, value: Any) -> bool:
    if type_ == "str":
        return isinstance(value, str)
    if type_ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "bool":
        return isinstance(value, bool)
    if type_ == "size":
        return isinstance(value, (str, int)) and not isinstance(value, bool)
    if type_.startswith("list["):
        inner = type_[5:-1]
        return isinstance(value, list) and bool(value) and all(_type_ok(inner, v) for v in value)
    return False


def validate(data: dict, where: str = "plan") -> dict:
    """Check every table and key; raise one-line UserErrors naming the key."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: a plan is a TOML table")
    for top, value in data.items():
        if top in ("ciphers", "storage", "network") and value is False:
            continue
        if top not in SCHEMA:
            raise UserError(f"{where}: unknown table [{top}]; allowed: {', '.join(TOP)}")
        if not isinstance(value, dict):
            raise UserError(f"{where}: [{top}] must be a table, not {type(value).__name__}")
        for key, v in value.items():
            if key not in SCHEMA[top]:
                raise UserError(f"{where}: unknown key {top}.{key}; allowed: "
                                f"{', '.join(SCHEMA[top])}")
            type_, allowed = SCHEMA[top][key]
            if not _type_ok(type_, v):
                shown = type_.replace("list[", "a non-empty list of ").replace("]", "s")
                raise UserError(f"{where}: {top}.{key} must be {shown}, not {v!r}")
            for item in v if isinstance(v, list) else [v]:
                if allowed is not None and item not in allowed:
                    raise UserError(f"{where}: {top}.{key} has {item!r}; allowed: "
                                    f"{', '.join(map(str, allowed))}")
    _validate_numbers(data, where)
    return data


def _validate_numbers(data: dict, where: str) -> None:
    c, p = data.get("ciphers") or {}, data.get("policy") or {}
    for size in c.get("sizes", []):
        if not 16 <= size <= 64 << 20:
            raise UserError(f"{where}: ciphers.sizes has {size}; allowed: 16 … 67108864 bytes")
    for t in c.get("threads", []) + ((data.get("storage") or {}).get("cpus") or []) + \
            ((data.get("network") or {}).get("cpus") or []):
        if not 1 <= t <= 1024:
            raise UserError(f"{where}: thread and cpu counts must be 1 … 1024, not {t}")
    if "seconds" in c and not 1 <= c["seconds"] <= 600:
        raise UserError(f"{where}: ciphers.seconds must be 1 … 600, not {c['seconds']}")
    n = data.get("network") or {}
    if "mtu" in n and not 576 <= n["mtu"] <= 65536:
        raise UserError(f"{where}: network.mtu must be 576 … 65536 (1500 and 9000 are usual), "
                        f"not {n['mtu']}")
    if "delay_ms" in n and not 0 <= n["delay_ms"] <= 1000:
        raise UserError(f"{where}: network.delay_ms must be 0 … 1000 (ms added to each round "
                        f"trip), not {n['delay_ms']:g}")
    if n.get("delay_ms") and n.get("link") not in (None, "netns"):
        raise UserError(f"{where}: network.delay_ms needs link = \"netns\": cryptcost adds a "
                        "delay only on a link whose interfaces it owns")
    link = n.get("link")
    if link is not None and link not in ("netns", "loopback") \
            and not (link.startswith("peer:") and len(link) > 5):
        raise UserError(f"{where}: network.link has {link!r}; allowed: netns, loopback, "
                        "peer:HOST")
    if "streams" in n and not 1 <= n["streams"] <= 128:
        raise UserError(f"{where}: network.streams must be 1 … 128, not {n['streams']}")
    if "seconds" in n and not 1 <= n["seconds"] <= 600:
        raise UserError(f"{where}: network.seconds must be 1 … 600, not {n['seconds']}")
    lo = p.get("min_samples", Policy.min_samples)
    hi = p.get("max_samples", max(Policy.max_samples, lo))
    if not 1 <= lo <= hi <= 1000:
        raise UserError(f"{where}: need 1 <= policy.min_samples <= policy.max_samples <= 1000")
    if "ci_target" in p and not 0 < p["ci_target"] < 100:
        raise UserError(f"{where}: policy.ci_target is a percentage between 0 and 100")
    if "warmup" in p and not 0 <= p["warmup"] <= 100:
        raise UserError(f"{where}: policy.warmup must be 0 … 100")


def read_text(path: str) -> str:
    """A plan's file, or one line saying why it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read plan {path}: {exc.strerror}") from None


def load_toml(path: str) -> dict:
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None


# --- built-in suites ---------------------------------------------------------------

# The ciphers the recommendation compares; the cells the stacks need are added to the table anyway.
QUICK_ALGOS = ["aes-256-xts", "aes-256-gcm", "chacha20-poly1305", "xchacha20-poly1305",
               "aes-256-siv"]


def suite_plans() -> dict[str, dict]:
    """The built-in suites as plans. Storage takes every storage stack; network takes the
    network stacks whose declared ``suites`` name the suite (a new plugin is in the moment
    its file is, if its facts say so), with the variants they declare for it."""
    return {
        # ≤ 4 minutes on 2 cores: the ciphers the stacks use, and every stack on the cell the
        # ranking and the recommendation read (1 MiB sequential write and read), after a warm-up
        # round: fewer cells rather than noisier ones. Its ciphers and network take 3 samples
        # of 1 s; its storage 4 of at least 0.25 s (storage.samples, sample_minimum; plain,
        # whose passes at memory speed take two speeds, 0.5 s: Plain.sample_floor). A storage
        # sample's cost is its passes, a fio start-up each, and a 95 % interval narrows with
        # the number of samples faster than with their length (docs/methodology.md). Every
        # built-in suite profiles its warm-up round where perf can (no pass of its own), so that
        # each verdict rests on where the CPU went.
        "quick": {"ciphers": {"engines": ["openssl", "go", "kernel"], "algorithms": QUICK_ALGOS,
                              "sizes": [4096], "threads": [1], "accel": ["on"]},
                  "storage": {"stacks": ["all"], "workloads": ["seq-1m"], "size": "512M",
                              "seq_cap": "256M", "ops_cap": 8192, "profile": True,
                              "samples": 4, "sample_minimum": 0.25},
                  "network": {"stacks": in_suite("quick", "network"), "workloads": ["send"],
                              "seconds": 1, "profile": True},
                  "policy": {"min_samples": 3, "max_samples": 3, "warmup": 1}},
        "standard": {"ciphers": {"sizes": [512, 4096, 65536], "threads": [1, 2],
                                 "accel": ["on", "off"]},
                     "storage": {"stacks": ["all"],
                                 "workloads": ["seq-quick", "rand4k", "smallfiles"],
                                 "size": "512M", "profile": True},
                     "network": {"stacks": in_suite("standard", "network"),
                                 "workloads": ["standard"], "accel": ["on", "off"],
                                 "profile": True},
                     "policy": {"min_samples": 3, "max_samples": 6, "warmup": 1}},
        "full": {"ciphers": {"sizes": list(ALL_SIZES), "threads": [1, 2], "accel": ["on", "off"]},
                 "storage": {"stacks": ["all"], "workloads": ["full"], "size": "1024M",
                             "profile": True},
                 "network": {"stacks": in_suite("full", "network"), "workloads": ["full"],
                             "profile": True},
                 "policy": {"min_samples": 3, "max_samples": 10, "warmup": 1}},
    }


# The standard suite's second part: acceleration on and off for every stack at one block size.
STANDARD_ACCEL = {"run": {"label": "acceleration on/off, 1 MiB sequential"}, **ACCEL_CORES}


def _merge(base: dict, over: dict) -> dict:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for k, v in over.items():
        both = isinstance(v, dict) and isinstance(merged.get(k), dict)
        merged[k] = {**merged[k], **v} if both else v
    return merged


def _part(data: dict, label: str) -> Part:
    """One part of the plan, as data; unknown stack names are refused here,
    what this host cannot run is decided by the runner."""
    storage = None if data.get("storage") is False else data.get("storage")
    network = None if data.get("network") is False else data.get("network")
    for kind, table in (("storage", storage), ("network", network)):
        for spec in (table or {}).get("stacks", []):
            if spec != "all":
                parse_spec(spec, kind)
    ciphers = None if data.get("ciphers") is False else data.get("ciphers")
    return Part(label=label, ciphers=ciphers, storage=storage, network=network,
                keep=tuple((data.get("run") or {}).get("keep") or ()))


def only_reports(plan: RunPlan, reports: tuple[str, ...]) -> RunPlan:
    """The seeds suite cut to the parts of ``reports`` (``run --only``, :func:`parse_only`'s):
    a part that serves two reports stays if either is asked for, and so does what the plan
    says it cannot run for them."""
    keep = set(reports)
    if plan.name != "seeds":
        raise UserError(f"--only picks field reports' parts of --suite seeds, not of "
                        f"{'a plan file' if plan.name == 'custom' else 'suite ' + plan.name}")
    return replace(plan, parts=[p for p in plan.parts if reports_of(p.label) & keep],
                   cannot_run=[c for c in plan.cannot_run
                               if reports_of(str(c.get("part") or "")) & keep])


def load(suite: str | None, plan_file: str | None) -> RunPlan:
    """A validated RunPlan from a suite name and/or a TOML file (the file's keys win)."""
    data: dict = {}
    if plan_file:
        data = validate(load_toml(plan_file), plan_file)
        suite = suite or (data.get("run") or {}).get("suite")
    suite = suite or ("custom" if plan_file else "quick")
    if suite not in SUITES and suite != "custom":
        raise UserError(f"unknown suite {suite!r}; allowed: {', '.join(SUITES)}")
    where = plan_file or f"suite {suite}"
    cannot: list[dict] = []
    if suite == "seeds":
        bases = seeds_plans()
        cannot += [{"part": "R4", "what": "iozone over NFS",
                    "reason": "iozone is no engine of cryptcost: its sequential reads and "
                              "writes are the put and get workloads, its mix is dbench",
                    "install": None}]
    elif suite == "standard":
        bases = [suite_plans()["standard"], STANDARD_ACCEL]
    else:
        bases = [suite_plans().get(suite, {})]
    parts, policy, model = [], {}, {}
    named = (data.get("storage") or {}) if isinstance(data.get("storage"), dict) else {}
    for base in bases:
        merged = validate(_merge(base, data), where)
        if isinstance(merged.get("storage"), dict) and "fit_size" not in named:
            # a size the plan file did not name is made smaller where the medium lacks room
            merged["storage"]["fit_size"] = "size" not in named
        label = (base.get("run") or {}).get("label") or suite
        parts.append(_part(merged, label))
        policy = {**merged.get("policy", {})}
        model = {**merged.get("model", {})}
    target_of(model)                                   # a bad device speed or link is a plan error
    parts = [p for p in parts if not p.empty()]
    if not parts:
        raise UserError(f"{where}: the plan has no [ciphers], [storage] or [network] table: "
                        "nothing to measure")
    return RunPlan(name=suite, label=(data.get("run") or {}).get("label"), parts=parts,
                   policy=policy, model=model, cannot_run=cannot)
