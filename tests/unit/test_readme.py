"""README.md is a newcomer's first screen: short, no day's figures in its prose, a picture
made from a real run, and every command in it one that parses as written."""

import re
import shlex
from pathlib import Path

import pytest

from cryptcost.cli import EXAMPLES, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SAMPLE = re.compile(r"<!-- sample -->.*?<!-- /sample -->", re.S)
PROSE = SAMPLE.sub("", README)


def commands() -> list[str]:
    """Every cryptcost command line in the README: in code blocks, and in backticks that
    start with `cryptcost ` (the commands table's examples)."""
    found = []
    for block in re.findall(r"```\n(.*?)```", PROSE, re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(("cryptcost ", "sudo cryptcost ", ".venv/bin/cryptcost ")):
                found.append(line)
    found += re.findall(r"`(cryptcost [^`]+)`", PROSE)
    return list(dict.fromkeys(found))


def test_the_readme_is_a_first_screen_not_a_lab_notebook():
    assert len(README.splitlines()) <= 200
    dated = [
        line
        for line in PROSE.splitlines()
        if re.search(
            r"\b(20[0-9]{2}-[0-9]{2}|today|yesterday|noisier day|quiet day|busy day)\b", line
        )
    ]
    assert dated == [], dated


def test_the_readme_has_examples_of_every_command():
    names = {_argv(c)[0] for c in commands() if _argv(c)}
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) <= names, f"no example of {sorted(set(sub.choices) - names)}"


def _argv(line: str) -> list[str]:
    """What follows the command's name (``cryptcost``, ``sudo cryptcost``,
    ``.venv/bin/cryptcost``)."""
    argv = shlex.split(line)
    at = next(i for i, a in enumerate(argv) if a.endswith("cryptcost"))
    return argv[at + 1:]


@pytest.mark.parametrize("line", commands())
def test_every_command_in_the_readme_parses_as_written(line):
    args = build_parser().parse_args(_argv(line))
    assert args.command, line


def test_the_readme_commands_make_runs_exist_and_its_picture_and_script_are_in_the_repo():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", README, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
    for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README):
        assert (ROOT / path).is_file(), path
    assert (ROOT / "docs/readme-assets").is_file() and "docs/readme-assets" in README
    assert SAMPLE.search(README), "the generated sample's markers are gone"
    for doc in re.findall(r"`((?:docs|bench)/[\w./-]+\.md)`", README):
        assert (ROOT / doc).is_file(), doc


HELP_EXAMPLES = [line for name, lines in EXAMPLES.items()
                 for line in lines if "COMMAND" not in line]


@pytest.mark.parametrize("line", HELP_EXAMPLES)
def test_every_example_that_help_prints_parses_as_written(line):
    assert build_parser().parse_args(_argv(line)).command, line


def test_every_commands_help_ends_with_its_examples():
    from cryptcost.cli import EXAMPLES
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(EXAMPLES) - {"cryptcost"}
    for name, command in [("cryptcost", parser), *sub.choices.items()]:
        text = command.format_help()
        assert text.rstrip().endswith(EXAMPLES[name][-1]), name


def test_the_stacks_the_guide_walks_through_are_the_real_files():
    """docs/adding-a-stack.md shows securefs.py and tls.py whole: every declaration, as they are."""
    guide = (ROOT / "docs/adding-a-stack.md").read_text()
    shown = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```\n<!-- end file -->", guide, re.S)
    assert [path for path, _ in shown] == [
        "src/cryptcost/stacks/securefs.py",
        "src/cryptcost/stacks/tls.py",
    ]
    for path, text in shown:
        assert text == (ROOT / path).read_text(), (
            f"{path} changed: paste it into docs/adding-a-stack.md again"
        )
