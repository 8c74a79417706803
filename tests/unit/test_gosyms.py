"""Function names for stripped Go programs (gocryptfs, rclone, wireguard-go), from their own
function table: checked against the linker's symbols of the same program built unstripped, and
against the entry point of the Go programs the stacks install."""

import os
import shutil
import subprocess

import pytest

from cryptcost.engines import gosyms, perf
from tests.conftest import skip_or_fail

SOURCE = """package main

import "fmt"

//go:noinline
func encryptLoop(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

func main() { fmt.Println(encryptLoop(10)) }
"""


def test_a_stripped_go_program_names_its_functions_as_the_linker_did(tmp_path):
    if not shutil.which("go") or not shutil.which("nm"):  # make installs Go for gofuse-passthrough
        skip_or_fail("gofuse-passthrough", "no Go toolchain (golang-go) or nm (binutils) here")
    (tmp_path / "main.go").write_text(SOURCE)
    env = {**os.environ, "GOCACHE": str(tmp_path / "cache"), "GOFLAGS": "-mod=mod",
           "GO111MODULE": "off", "CGO_ENABLED": "0"}
    for name, flags in (("full", []), ("stripped", ["-ldflags=-s -w"])):
        subprocess.run(["go", "build", *flags, "-o", name, "main.go"], cwd=tmp_path, env=env,
                       check=True, capture_output=True, timeout=300)
    symbols = {
        line.split()[2]: int(line.split()[0], 16)
        for line in subprocess.run(
            ["nm", str(tmp_path / "full")], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if len(line.split()) == 3
    }
    stripped = subprocess.run(["nm", str(tmp_path / "stripped")], capture_output=True, text=True)
    assert "encryptLoop" not in stripped.stdout + stripped.stderr          # no symbol table left
    table = gosyms.table(str(tmp_path / "stripped"))
    assert table is not None and len(table) > 100
    for fn in ("main.encryptLoop", "main.main", "runtime.mallocgc"):
        assert table.name(symbols[fn]) == fn and table.name(symbols[fn] + 1) == fn, fn
    assert table.name(0x10) is None
    # perf's frame for an address it could not name, in that program, prints its file offset
    # (readelf's .text: address and offset), and gets the function's name
    text = next(
        line.split()
        for line in subprocess.run(
            ["readelf", "-SW", str(tmp_path / "stripped")], capture_output=True, text=True,
            check=True,
        ).stdout.splitlines()
        if " .text " in line
    )
    at = text.index(".text")
    offset = symbols["main.encryptLoop"] + 4 - int(text[at + 2], 16) + int(text[at + 3], 16)
    assert table.at_offset(offset) == "main.encryptLoop"
    frame = f"\t    {offset:x} [unknown] ({tmp_path / 'stripped'})"
    [sample] = perf.parse_script("main 1.000000:\n" + frame + "\n")
    assert sample.frames == (("main.encryptLoop", str(tmp_path / "stripped")),)


@pytest.mark.parametrize("program, stack", [("/usr/bin/gocryptfs", "gocryptfs"),
                                            ("/usr/bin/rclone", "rclone-crypt"),
                                            ("/usr/bin/wireguard-go", "wireguard")])
def test_the_stacks_go_programs_name_what_they_export(program, stack):
    """Go's cgo bridge ``crosscall2`` is in the program's dynamic symbols (which stripping
    keeps): the table names its address the same."""
    if not os.path.exists(program):
        skip_or_fail(stack, f"{program} is not installed")
    table = gosyms.table(program)
    assert table is not None, program
    exported = {
        line.split()[2]: int(line.split()[0], 16)
        for line in subprocess.run(
            ["nm", "-D", "--defined-only", program], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if len(line.split()) == 3
    }
    assert table.name(exported["crosscall2"]) == "crosscall2"
    assert any(n.startswith(("crypto/", "golang.org/x/crypto/")) for n in table.names)


def test_what_is_not_a_go_program_has_no_table(tmp_path):
    assert gosyms.table("/bin/sh") is None
    assert gosyms.table(str(tmp_path / "none")) is None
    (tmp_path / "junk").write_bytes(b"\x7fELF" + b"\0" * 100)
    assert gosyms.table(str(tmp_path / "junk")) is None
