"""Every import points down the layers that ARCHITECTURE.md draws, no module
grows past 400 lines nor a line past 100 characters, and proc.py is the only
module that starts processes."""

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "cryptcost"
ROOT = SRC.parents[1]

# Lowest first. A module may import its own package and any lower layer.
LAYERS = [
    {"errors", "__init__", "vocabulary"}, {"units", "stats", "proc", "faults"}, {"model"},
    {"record"}, {"host", "lifecycle", "store"}, {"engines", "media", "links"}, {"stacks"},
    {"workloads"}, {"runner"}, {"guest"}, {"suite", "fleet"}, {"analysis"}, {"report"}, {"cli"},
]
MAX_LINES = 400
MAX_WIDTH = 100


def _unit(path: Path) -> str:
    """The layer unit of a module: its top package, or its own name."""
    rel = path.relative_to(SRC)
    if rel.parts == ("__main__.py",):
        return "cli"                      # ``python -m cryptcost`` is the command line
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _rank(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS and to ARCHITECTURE.md")


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names if n.startswith("cryptcost")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("cryptcost")]
    return found


def _target_unit(name: str) -> str | None:
    parts = name.split(".")[1:]
    if not parts:
        return None
    if (SRC / parts[0]).is_dir() or (SRC / f"{parts[0]}.py").exists():
        return parts[0]
    return None                       # ``from cryptcost import X`` where X is a name, not a module


def _modules():
    return sorted(p for p in SRC.rglob("*.py"))


def test_every_import_points_down():
    upward = []
    for path in _modules():
        unit = _unit(path)
        rank = _rank(unit)
        for line, name in _imports(ast.parse(path.read_text())):
            target = _target_unit(name)
            if target is None or target == unit:
                continue
            if _rank(target) > rank or (_rank(target) == rank and target != unit):
                upward.append(f"{path.relative_to(ROOT)}:{line} ({unit}) imports {name} ({target})")
    assert upward == [], "imports that run up (or sideways) the layers:\n" + "\n".join(
        sorted(set(upward))
    )


def test_the_layer_test_can_fail():
    """The checker itself: an upward import is found."""
    tree = ast.parse("from cryptcost.cli import main\nimport cryptcost.report.html\n")
    targets = {_target_unit(n) for _, n in _imports(tree)}
    assert {"cli", "report"} <= targets and _rank("cli") > _rank("stacks")


def test_no_module_over_400_lines():
    big = {str(p.relative_to(ROOT)): n for p in _modules()
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def _too_wide(paths) -> dict[str, list[int]]:
    out = {}
    for p in paths:
        wide = [i for i, line in enumerate(p.read_text().splitlines(), 1) if len(line) > MAX_WIDTH]
        if wide:
            out[str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)] = wide
    return out


def _python_files() -> list[Path]:
    """Every Python file of the project: src/, tests/ and bench/'s scripts (no suffix there)."""
    def python(p: Path) -> bool:
        return p.suffix == ".py" or not p.suffix and p.read_text(errors="replace").startswith(
            "#!/usr/bin/env python")
    bench = [p for p in (ROOT / "bench").iterdir() if p.is_file() and python(p)]
    return _modules() + sorted((ROOT / "tests").rglob("*.py")) + sorted(bench)


def test_no_line_over_100_characters():
    """Characters, not bytes: "≥" and "–" count one each; in src/, tests/ and bench/."""
    files = _python_files()
    assert any("tests" in p.parts for p in files) and any("bench" in p.parts for p in files)
    assert _too_wide(files) == {}


def test_the_width_check_can_fail(tmp_path):
    wide = tmp_path / "wide.py"
    wide.write_text("x = 1\n" + "y = '" + "≥" * 95 + "'\n")
    assert _too_wide([wide]) == {str(wide): [2]}
    wide.write_text("y = '" + "≥" * 94 + "'\n")          # 100 characters, 286 bytes
    assert _too_wide([wide]) == {}


def test_architecture_md_lists_the_layers():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    for layer in LAYERS:
        for unit in layer - {"__init__"}:
            assert f"`{unit}" in text, f"ARCHITECTURE.md does not name the layer unit {unit}"


SPAWNERS = {
    "subprocess": None, "multiprocessing": None, "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "os": {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl",
           "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
           "spawnle", "posix_spawn", "posix_spawnp"},
}


def _spawns(tree: ast.AST) -> list[str]:
    """Imports of process-starting modules, and calls of process-starting functions."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                a.name
                for a in node.names
                if a.name.split(".")[0] in ("subprocess", "multiprocessing")
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in ("subprocess", "multiprocessing"):
                found.append(node.module)
            elif top in SPAWNERS and SPAWNERS[top]:
                found += [f"{top}.{a.name}" for a in node.names if a.name in SPAWNERS[top]]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = SPAWNERS.get(node.value.id)
            if names and node.attr in names:
                found.append(f"{node.value.id}.{node.attr}")
    return found


def test_proc_is_the_only_spawner():
    offenders = {}
    for path in _modules():
        if path.name == "proc.py" and path.parent == SRC:
            continue
        hits = _spawns(ast.parse(path.read_text()))
        if hits:
            offenders[str(path.relative_to(ROOT))] = hits
    assert offenders == {}


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess", "from multiprocessing import Process",
        "import asyncio\nasyncio.create_subprocess_exec('x')",
        "from asyncio import create_subprocess_shell", "import os\nos.system('x')",
        "import os\nos.posix_spawn('x', [], {})", "from os import fork",
        "import pty\npty.spawn('x')",
    ],
)
def test_the_spawn_guard_catches(code):
    assert _spawns(ast.parse(code))


def _module_of(name: str) -> str | None:
    """The module file an imported name loads: ``cryptcost.a.b`` → ``a/b.py`` or
    ``a/b/__init__.py``."""
    parts = name.split(".")[1:]
    if not parts:
        return None
    rel = Path(*parts)
    for path in (SRC / rel.with_suffix(".py"), SRC / rel / "__init__.py"):
        if path.exists():
            return str(path.relative_to(SRC))
    return None


def _load_time_imports(source: str) -> set[str]:
    """The modules a module imports while it loads: its top-level imports, not those inside a
    function (which run later, once every module has loaded)."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import x`` loads pkg.x where x is a module, else pkg itself
            found |= {_module_of(f"{node.module}.{a.name}") or _module_of(node.module)
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {_module_of(a.name) for a in node.names}
    return {m for m in found if m}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle of ``graph`` found by a depth-first walk, as the path that closes it."""
    cycles, state = [], {}

    def walk(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return cycles


def test_no_two_modules_import_each_other_while_loading():
    """A cycle of load-time imports works or fails by which module happens to be imported first
    (``runner.suite`` ↔ ``runner.budget`` failed when a test imported ``suite`` alone)."""
    graph = {str(p.relative_to(SRC)): _load_time_imports(p.read_text()) for p in _modules()}
    assert _cycles(graph) == []


def test_the_cycle_check_can_fail():
    graph = {"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}, "d.py": {"a.py"}}
    assert _cycles(graph) == [["a.py", "b.py", "c.py", "a.py"]]


MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8


def test_no_function_in_cli_suite_or_runner_over_60_lines_or_8_parameters():
    """The main job's path reads in a screen a function: none in cli/, suite/ and runner/ is
    longer than 60 lines (its docstring included) or takes more than 8 parameters (self and
    cls not counted)."""
    found = {}
    for top in ("cli", "suite", "runner"):
        for path in sorted((SRC / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg,
                                                                                  a.kwarg))]
                if params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES or len(params) > MAX_PARAMETERS:
                    found[f"{path.relative_to(ROOT)}:{node.name}"] = (lines, len(params))
    assert found == {}


def test_the_architecture_table_is_the_layers_in_two_sentences_a_cell():
    """ARCHITECTURE.md's table lists LAYERS from the top down, and reads on one page: no cell
    longer than two sentences."""
    rows = [line.split("|")[1:-1] for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines()
            if re.match(r"^\| \d+ \|", line)]
    assert [int(r[0]) for r in rows] == list(range(len(LAYERS) - 1, -1, -1))
    for (_, units, _), layer in zip(rows, reversed(LAYERS)):
        assert set(re.findall(r"`(\w+)`", units)) == layer - {"__init__"}
    long = [cell.strip()[:60] for row in rows for cell in row
            if len(re.findall(r"[.!?](?:\s|$)", cell.strip())) > 2]
    assert long == []
