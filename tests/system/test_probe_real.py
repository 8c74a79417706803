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
    for feat in (
        "dm-crypt", "af_alg", "fuse", "fscrypt", "loop", "netns", "tun", "esp", "wireguard", "nfs",
    ):
        assert feat in info["features"]
    names = {s["name"] for s in info["stacks"]}
    assert {"plain", "fscrypt", "gocryptfs", "luks-userspace", "luks", "dm-null", "zfs"} <= names
    for s in info["stacks"]:
        assert set(s) >= {"name", "available", "reason", "install"}
        if not s["available"]:
            assert s["reason"], s


def test_kernel_stacks_follow_the_kernel_features(cli):
    """luks and dm-null are available exactly when the kernel has dm-crypt
    (and say why and how when not); zfs likewise with its module."""
    info = json.loads(cli("probe", "--json").stdout)
    stacks = {s["name"]: s for s in info["stacks"]}
    dm = info["features"]["dm-crypt"]["present"]
    for name in ("luks", "dm-null"):
        s = stacks[name]
        if not dm:
            assert not s["available"] and "dm-crypt" in s["reason"] and s["install"], s
        else:
            assert s["available"] or "not installed" in s["reason"], s
    if not info["features"]["zfs"]["present"]:
        assert not stacks["zfs"]["available"] and "zfs" in stacks["zfs"]["install"].lower()
    else:
        assert stacks["zfs"]["available"] or "zfs" in stacks["zfs"]["reason"]


def test_probe_names_the_software_kernel_aes_plainly(cli):
    info = json.loads(cli("probe", "--json").stdout)
    drivers = info["crypto_drivers"]
    software = [n for n in ("aes", "ecb(aes)", "cbc(aes)", "xts(aes)", "ctr(aes)", "gcm(aes)")
                if drivers.get(n, {}).get("implementation") == "software"]
    said = any("software AES" in n for n in info["notes"])
    assert said == bool(software and info["cpu"]["flags"]["aes"]), (software, info["notes"])
