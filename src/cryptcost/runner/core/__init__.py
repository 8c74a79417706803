"""The comparison machinery every kind shares: the interleaved scheduler, pairing with
baselines and acceleration-off copies, the flow from instances to stored results, the sink,
the profiled round, CPU pinning and what a run quiets on the host."""
