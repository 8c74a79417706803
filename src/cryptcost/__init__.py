"""cryptcost — what encryption costs on this machine, and which option to pick.

Vocabulary (each word is used in this one sense throughout the code and docs):

stack
    An encrypted storage or network configuration, or its plaintext twin:
    ``plain``, ``fscrypt``, ``gocryptfs``, ``tcp`` … One plugin class per
    stack, in :mod:`cryptcost.stacks`, declaring its *facts*.
kind
    Of a stack or a result: ``storage``, ``network`` (and ``cipher`` for
    raw-cipher results). Nothing else is called a kind.
facts
    What a stack declares about itself — kind, layer, role, use case,
    baselines, security facts, tools, kernel features, cipher — stored with
    every result and the only thing the analysis knows of a stack.
baseline
    A stack whose role is to be the plaintext reference of others
    (``plain``, ``fuse-passthrough``, ``tcp``, ``zfs:off``); a stack's
    *baselines* are the ones it is compared with, nearest first, and the
    last of them is its *reference*.
medium
    What a storage stack sits on: a RAM-backed loop device, a scratch
    directory, or a named block device (:mod:`cryptcost.media`).
link
    Where a network stack's traffic flows: two network namespaces joined by
    veth, or loopback (:mod:`cryptcost.links`).
workload
    What is done to a stack: a fio job, a file tree, an iperf3 stream.
engine
    A wrapped external program that does the measuring: ``openssl speed``,
    ``gocryptfs -speed``, ``cryptsetup benchmark``, fio, dbench, tar,
    iperf3 (:mod:`cryptcost.engines`).
check
    ``Stack.require()``: whether a stack can run here, touching nothing
    (raises ``Unavailable`` with the reason and how to get it). Checking
    input is *validating*; checking a stack's bytes is the *integrity* check.
sample
    One measurement: one engine invocation, with its CPU accounting
    (:class:`cryptcost.model.Sample`).
series
    The samples of one (stack or engine, parameters, workload) cell,
    repeated until stable.
result
    A series summarised: median, 95 % confidence interval, sample count,
    overhead against its baselines (:class:`cryptcost.model.Result`).
cell
    What identifies a result within a run: stack, workload, op, block
    size, queue depth, CPUs, plan part, medium, filesystem and size. A
    result is paired with its baseline's result for the same cell.
run
    One invocation of cryptcost that produced results, with the host it
    ran on (:class:`cryptcost.model.Run`), kept in the result store.
"""

__version__ = "0.1.0"
