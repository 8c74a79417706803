"""``tcp``: the network baseline — plain TCP over the same link, no crypto.

This is the reference implementation of
:class:`~cryptcost.stacks.net.NetworkStack`: the client reaches the service
at the server end's own address.
"""

from __future__ import annotations

from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.net import Endpoint, NetworkStack

IP = Tool("ip", "ip", "iproute2", ("ip", "-V"), r"iproute2-(?:ss)?([\w.]+)")


class Tcp(NetworkStack):
    name = "tcp"
    description = "plain TCP between the link's ends (network baseline)"
    layer = "kernel"
    role = "baseline"
    tools = (IP, "iperf3")

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        return Endpoint(link.b_addr, service)
