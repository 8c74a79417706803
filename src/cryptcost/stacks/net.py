"""Network stacks: a :class:`~cryptcost.stacks.base.Stack` built between the
two ends of a :class:`~cryptcost.links.Link`.

The runner sets the link up once (:meth:`~cryptcost.links.Link.setup`), so
that every stack and its baseline share it. Call order, after the common
ones: ``setup(res, link, service)`` builds the
stack so that a client at end ``a`` reaches ``service`` — a TCP port a
workload (iperf3, smbd) listens on at end ``b`` — and returns the
:class:`Endpoint` the client must connect to. A tunnel returns its inner
address; a TLS or SSH forwarder the local port of its client side.
``verify(res)`` reads back what was negotiated (cipher suite, proposal).

Reference implementation: :mod:`cryptcost.stacks.tcp`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import Stack


@dataclass(frozen=True)
class Endpoint:
    """Where a client at end ``a`` connects: ``host``:``port``."""

    host: str
    port: int


class NetworkStack(Stack):
    """A network stack. See the module docstring for the call order."""

    kind = "network"
    features = ("netns", "veth")

    @abstractmethod
    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        """Build the stack on ``link``; return where ``a`` reaches ``service`` on ``b``."""

    def verify(self, res: Resources) -> dict:
        """What was negotiated, read back from the stack (empty: nothing to read)."""
        return {}
