"""Function names for a stripped Go program, from its own function table.

Debian strips its Go programs (gocryptfs, rclone, wireguard-go): perf then
has no symbol for their code, and a profile could not tell their cipher
(Go's ``crypto/…`` packages) from their FUSE code or their runtime. Every Go
binary keeps the table its runtime needs for stack traces, ``.gopclntab``,
stripped or not; its header, function table and name table give the
function that holds any address of the program's text (Go 1.18 and later:
the layout ``runtime/symtab.go`` calls ``pcHeader``). perf prints an address
it has no symbol for as an offset into the file; a position-dependent
executable (Go's default, and Debian's builds) loads its segments at the
addresses its program headers give, which turn that offset back into the
address the table knows. Anything else —
an older Go, a position-independent build, no table — resolves to nothing,
as before.
"""

from __future__ import annotations

import bisect
import struct
from functools import lru_cache
from pathlib import Path

MAGICS = (0xFFFFFFF0, 0xFFFFFFF1)        # Go 1.18–1.19, Go 1.20 and later
ET_EXEC = 2                               # a position-dependent executable


class Table:
    """The functions of one Go program: :meth:`name` of an address."""

    def __init__(self, entries: list[int], names: list[str], end: int,
                 loads: tuple[tuple[int, int, int], ...] = ()):
        self.entries, self.names, self.end = entries, names, end
        self.loads = loads                # (file offset, size, address) of each loaded segment

    def at_offset(self, offset: int) -> str | None:
        """The function at a file offset: what perf prints for an address in a program it
        has no symbols for (the address less its mapping's start, plus the mapping's offset)."""
        for start, size, address in self.loads:
            if start <= offset < start + size:
                return self.name(offset - start + address)
        return None

    def name(self, address: int) -> str | None:
        i = bisect.bisect_right(self.entries, address) - 1
        if i < 0 or address >= self.end:
            return None
        return self.names[i]

    def __len__(self) -> int:
        return len(self.names)


def _section(data: bytes, wanted: str) -> tuple[int, int, int] | None:
    """(file offset, size, address) of a little-endian ELF64's section ``wanted``."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return None
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    for name, _type, _flags, addr, offset, size in headers:
        end = data.index(b"\0", strtab + name)
        if data[strtab + name:end].decode(errors="replace") == wanted:
            return offset, size, addr
    return None


def parse(data: bytes) -> Table | None:
    """The function table of a Go program's bytes; None where it has none this reads."""
    if len(data) < 64 or struct.unpack_from("<H", data, 0x10)[0] != ET_EXEC:
        return None
    where = _section(data, ".gopclntab")
    if where is None:
        return None
    base, size, _ = where
    magic, _, _, _min_lc, ptr = struct.unpack_from("<IBBBB", data, base)
    if magic not in MAGICS or ptr != 8:
        return None
    nfunc, _nfiles, text, names_off, _cu, _files, _pc, funcs_off = struct.unpack_from(
        "<qQQQQQQQ", data, base + 8)
    if not 0 < nfunc < 10_000_000 or funcs_off >= size:
        return None
    if not text:                  # newer linkers leave it to the runtime: the text's start
        code = _section(data, ".text")
        if code is None:
            return None
        text = code[2]
    table = base + funcs_off
    names_at = base + names_off
    entries, names = [], []
    for i in range(nfunc):
        entry_off, func_off = struct.unpack_from("<II", data, table + 8 * i)
        _entry, name_off = struct.unpack_from("<Ii", data, table + func_off)
        start = names_at + name_off
        names.append(data[start:data.index(b"\0", start)].decode(errors="replace"))
        entries.append(text + entry_off)
    end_off, = struct.unpack_from("<I", data, table + 8 * nfunc)
    return Table(entries, names, text + end_off, _loads(data))


def _loads(data: bytes) -> tuple[tuple[int, int, int], ...]:
    """(file offset, file size, address) of each PT_LOAD segment of an ELF64."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    out = []
    for i in range(phnum):
        kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if kind == 1:
            out.append((offset, filesz, vaddr))
    return tuple(out)


@lru_cache(maxsize=32)
def _table(path: str, mtime_ns: int) -> Table | None:
    try:
        return parse(Path(path).read_bytes())
    except (OSError, struct.error, ValueError, IndexError):
        return None


def table(path: str) -> Table | None:
    """The function table of the Go program at ``path`` (read once per version of the file);
    None for anything else."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return _table(path, stat.st_mtime_ns)
