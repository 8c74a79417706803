"""cryptcost — what encryption costs on this machine, and which option to pick.

Vocabulary (each word is used in this one sense throughout the code and docs):

stack
    An encrypted storage or network configuration, or its plaintext twin
    (the *baseline*): ``plain``, ``fscrypt``, ``gocryptfs``, ``tls`` …
    One plugin class per stack, in :mod:`cryptcost.stacks`.
medium
    What a storage stack sits on: a RAM-backed loop device, a scratch
    directory, or a named block device (:mod:`cryptcost.media`).
workload
    What is done to a stack: a fio job, a file tree, an iperf3 stream.
engine
    A wrapped external program that does the measuring: ``openssl speed``,
    ``gocryptfs -speed``, ``cryptsetup benchmark``, fio, iperf3
    (:mod:`cryptcost.engines`).
sample
    One measurement: one engine invocation, with its CPU accounting
    (:class:`cryptcost.model.Sample`).
series
    The samples of one (stack or engine, parameters, workload) cell,
    repeated until stable.
result
    A series summarised: median, 95 % confidence interval, sample count,
    overhead against its baseline (:class:`cryptcost.model.Result`).
run
    One invocation of cryptcost that produced results, with the host it
    ran on (:class:`cryptcost.model.Run`), kept in the result store.
"""

__version__ = "0.1.0"
