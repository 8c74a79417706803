"""The words cryptcost's code, output and docs use, one sense each.

A word here means only what it says here. Code that needs another sense
takes another word: a stack that cannot run is *required* (``require``),
bad input is *validated* (``validate``), what a stack or a pass did is
*verified* (``verify``), two series are *compared* (``compare``), a run is
*gated* against a named baseline (``judge``; the command is ``cryptcost check``), and a
prediction or a field report's conclusion *holds* or not (``holds``); nothing in the code is
named ``check``. ``tests/unit/test_vocabulary.py`` holds the
code to these words and docs/contributing.md to this list.
"""

from __future__ import annotations

TERMS: dict[str, str] = {
    # what is measured
    "cell": "what one measurement is of: kind, stack and variant, workload, op, block size, "
            "queue depth, streams, CPUs, acceleration, medium or link (model.Cell)",
    "series": "the samples of one cell in one run",
    "sample": "one value of a series: at least a second of measured time, which for storage "
              "is one or more passes",
    "pass": "one run of the engine inside a sample (one fio job over one file)",
    "round": "one sample of every series, in the run's interleaved order",
    "warm-up round": "a round that is run and not stored",
    "result": "a series summarised: its median, 95 % interval and comparison with each "
              "baseline",
    "step": "one workload operation on every instance of a part (a row of the progress)",
    "part": "one block of a plan: the ciphers, storage or network with their settings",
    "plan": "what a run measures: parts and a sampling policy, from a TOML file or a suite",
    "suite": "a plan built in (quick, standard, seeds, full)",
    "sitting": "one invocation of cryptcost run measuring into a run; a run resumed with "
               "--resume has several, each measuring the parts the run does not hold whole",
    # what is compared
    "stack": "an encrypted storage or network configuration, or a plaintext one to compare "
             "it with; a plugin in stacks/",
    "kind": "of a stack, a cell or a result: storage, network, or cipher (raw-cipher results); "
            "nothing else is called a kind",
    "facts": "what a stack declares about itself (kind, layer, role, use case, baselines, "
             "security facts, tools, kernel features, cipher), stored with every result: the "
             "only thing the analysis knows of a stack",
    "medium": "what a storage stack sits on: a RAM-backed loop device, a scratch directory, a "
              "throttled device or a named block device (media/)",
    "link": "where a network stack's traffic flows: two network namespaces joined by veth, "
            "loopback, or another host (links/)",
    "workload": "what is done to a stack: a fio job, a file tree, a program's mix, an iperf3 "
                "stream",
    "engine": "a wrapped program that does the measuring: openssl speed, gocryptfs -speed, "
              "cryptsetup benchmark, fio, bonnie++, dbench, iperf3 (engines/)",
    "run": "one invocation of cryptcost that produced results, with the host it ran on, kept "
           "in the result store",
    "variant": "one setting of a stack (a cipher, a mode), written stack:variant",
    "instance": "a stack set up for a run, on its medium or link",
    "baseline": "a stack without encryption that others are compared against (role baseline)",
    "matched baseline": "a stack's first baseline: the one its overhead is ranked by",
    "reference": "a stack's last baseline, the plainest (plain, tcp)",
    "twin": "a stack's matched baseline when it has two: the stack without its cipher "
            "(qemu-raw for luks-userspace); the cost split runs reference → twin → stack",
    "acceleration-off copy": "a stack measured again with its crypto library's hardware "
                             "acceleration switched off (label …/accel-off)",
    "overhead": "1 − stack/baseline, of the medians, with its interval",
    "declared cipher": "the cipher a stack says it runs and where (kernel, OpenSSL, Go), "
                       "stored as params.cipher_ref",
    "ceiling": "the throughput a layer alone allows: the device (the baseline), the link, "
               "the declared cipher at the stack's threads",
    "bottleneck": "what limits a result: the first ceiling or CPU rule that holds, or its "
                  "profile's layer",
    "layer": "where a profiled CPU sample ran (analysis.profile.LAYERS): the cipher, copies, "
             "FUSE, the page cache, the block layer, the network, system calls and TUN, memory "
             "management, the stack's own code, the measuring tool, idle",
    "yardstick": "a fixed piece of CPU work timed before every sample, to see the host's "
                 "speed move (host_drift)",
    "emulated": "measured in a guest under TCG: correct, not a speed for this hardware",
    # what is done to them
    "require": "raise Unavailable, with the reason and the fix, when something cannot run here",
    "validate": "refuse bad input with one line and exit code 2",
    "verify": "confirm what a stack or a pass did: data read back, the cipher in use, the "
              "bytes moved, nothing in plaintext on the wire",
    "compare": "test two series against each other (ratio of medians, interval, Welch, "
               "Mann–Whitney)",
    "hold": "a prediction or a field report's conclusion borne out by this run's figures",
    # the regression gate
    "named baseline": "a run saved under a name (cryptcost baseline save) that later runs are "
                      "gated against; not a baseline stack",
    "gate": "judge a run against a named baseline, each cell both hold, with an exit status "
            "(cryptcost check)",
    "regression": "a cell significantly slower, or costlier in CPU per byte, than in the named "
                  "baseline by more than the threshold, and more than the host's own move",
}


def markdown() -> str:
    """The terms as a Markdown list, as docs/contributing.md shows them."""
    return "".join(f"- **{word}**: {sense}.\n" for word, sense in TERMS.items())
