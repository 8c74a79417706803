"""``cryptcost worker``: end ``b`` of ``--link peer:HOST``, started by the
controller over ``ssh`` (:mod:`cryptcost.links.worker`); not run by hand."""

from __future__ import annotations

import os
import sys

from cryptcost.cli.common import probe_host
from cryptcost.lifecycle.lock import run_lock
from cryptcost.lifecycle.resources import Resources, install_signal_handlers
from cryptcost.links import worker


SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def add_parser(sub, common) -> None:
    p = sub.add_parser("worker", parents=[common],
                       help="end b of a peer link: started by the controller over ssh, speaking "
                            "JSON lines on stdin and stdout (not run by hand)")
    p.add_argument("--idle", type=float, default=worker.IDLE, metavar="SECONDS",
                   help="release everything and exit after this long without a request "
                        "(default: %(default)g)")
    p.set_defaults(func=run)


def run(args) -> int:
    if os.geteuid() != 0:
        return worker.refuse("the worker needs root on the peer (namespaces, daemons, key "
                             "tmpfs): log in as root, or pass --peer-sudo with a sudoers "
                             "entry that allows 'sudo -n cryptcost worker'")
    # an ssh session's PATH (or sudo's, without a secure_path) may lack the sbin directories
    # where root's tools live (ip, ethtool, smbd, charon)
    path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(path + [d for d in SBIN if d not in path])
    install_signal_handlers()            # SIGTERM and SIGHUP release, as the end of input does
    with run_lock(sys.argv[1:]), Resources() as res:
        return worker.serve(res, idle=args.idle, probe=probe_host)
