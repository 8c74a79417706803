"""``tcp``: the network baseline — plain TCP over the same link, no crypto.

This is the model implementation of
:class:`~cryptcost.stacks.net.NetworkStack`: the client reaches the service
at the server end's own address.
"""

from __future__ import annotations

from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.net import Endpoint, NetworkStack


class Tcp(NetworkStack):
    name = "tcp"
    description = "plain TCP between the link's ends (network baseline)"
    layer = "kernel"
    role = "baseline"
    links = ("netns", "loopback", "peer")

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        return Endpoint(link.b_addr, service)
