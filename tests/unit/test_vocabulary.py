"""One sense per word (cryptcost.vocabulary): the docs list the words as the module does, no
function is named ``check`` in any of its senses, and an acceleration-off copy is never called
a twin (the twin is the cost split's matched baseline)."""

import ast
import re
from pathlib import Path

from cryptcost import vocabulary

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "cryptcost"
CHECK = re.compile(r"^_?check(_|$)")
ACCEL_TWIN = re.compile(r"accel\w*[- ]off twin|acceleration twin|accel_twin|twin of each", re.I)


def _functions(tree: ast.AST) -> list[str]:
    return [
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _named_check(paths) -> list[str]:
    return [f"{p.name}: {name}" for p in paths for name in _functions(ast.parse(p.read_text()))
            if CHECK.match(name)]


def test_the_docs_list_the_words_as_the_module_does():
    doc = (ROOT / "docs/contributing.md").read_text()
    shown = re.search(r"<!-- vocabulary -->\n(.*?)<!-- end vocabulary -->", doc, re.S)
    assert shown and shown.group(1) == vocabulary.markdown()


def test_no_function_is_named_check():
    assert _named_check(sorted(SRC.rglob("*.py"))) == []


def test_the_check_on_names_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def check():\n    pass\n\n\nclass A:\n    def _check_x(self):\n        pass\n"
                   "\n    def checked(self):\n        pass\n")
    assert _named_check([bad]) == ["bad.py: check", "bad.py: _check_x"]


def test_an_acceleration_off_copy_is_never_called_a_twin():
    texts = [*SRC.rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md",
             ROOT / "ARCHITECTURE.md"]
    found = [f"{p.name}: {m.group(0)}" for p in texts for m in ACCEL_TWIN.finditer(p.read_text())]
    assert found == []
    assert ACCEL_TWIN.search("adds the acceleration-off twins") and not ACCEL_TWIN.search(
        "reference → twin → stack")


def test_every_word_has_one_sense_written_as_a_phrase():
    assert all(sense and not sense.endswith(".") for sense in vocabulary.TERMS.values())
    assert len({w.lower() for w in vocabulary.TERMS}) == len(vocabulary.TERMS)
