"""The host: CPU, kernel, tools and the probe that records them (rule 13)."""

from pathlib import Path


def read_text(path: Path) -> str:
    """A sysfs or procfs file's text, stripped; "" where it cannot be read."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def key_value_blocks(text: str) -> list[dict[str, str]]:
    """Blank-line separated blocks of ``key : value`` lines (/proc/cpuinfo,
    /proc/crypto), each as a dict with keys and values stripped."""
    blocks = []
    for block in text.strip().split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            entry[key.strip()] = value.strip()
        blocks.append(entry)
    return blocks
