"""``probe --json`` on this host: the interface contract."""

import json


def test_probe_contract(cli):
    proc = cli("probe", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert {"model", "cores", "flags"} <= set(info["cpu"])
    assert {"aes", "vaes", "vpclmulqdq", "avx2", "avx512f", "sha_ni"} <= set(info["cpu"]["flags"])
    assert info["kernel"]["release"]
    assert "aes" in info["crypto_drivers"]
    assert info["tools"]["openssl"]
    for feat in ("dm-crypt", "af_alg", "fuse", "fscrypt", "loop", "netns", "tun", "esp", "wireguard", "nfs"):
        assert feat in info["features"]
    names = {s["name"] for s in info["stacks"]}
    assert {"plain", "fscrypt", "gocryptfs", "luks-userspace", "luks", "dm-null", "zfs"} <= names
    for s in info["stacks"]:
        assert set(s) >= {"name", "available", "reason", "install"}
        if not s["available"]:
            assert s["reason"], s


def test_unavailable_kernel_stacks_say_why_and_how(cli):
    info = json.loads(cli("probe", "--json").stdout)
    stacks = {s["name"]: s for s in info["stacks"]}
    if not info["features"]["dm-crypt"]["present"]:
        for name in ("luks", "dm-null"):
            assert not stacks[name]["available"]
            assert "dm-crypt" in stacks[name]["reason"] and stacks[name]["install"]
    if not info["features"]["zfs"]["present"]:
        assert not stacks["zfs"]["available"] and "zfs" in stacks["zfs"]["install"].lower()


def test_probe_names_the_software_kernel_aes_plainly(cli):
    info = json.loads(cli("probe", "--json").stdout)
    drivers = info["crypto_drivers"]
    if drivers.get("cbc(aes)", {}).get("implementation") == "software" and info["cpu"]["flags"]["aes"]:
        assert any("software AES" in n for n in info["notes"])
