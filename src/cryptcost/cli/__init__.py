"""Command-line entry point: parse → one subcommand module → exit code.

Every subcommand lives in its own module with ``add_parser(sub)`` and
``run(args) -> int``. Errors are caught once, here: ``error: …`` on one
line, exit 2 for user errors and 1 for failures, a traceback only with
``--debug``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from cryptcost import __version__
from cryptcost.errors import CryptcostError, UserError
from cryptcost.lifecycle.journal import Journal, journals
from cryptcost.lifecycle.lock import require_free
from cryptcost.lifecycle.resources import Terminated

from cryptcost.cli import (baseline, check, ciphers, cleanup, compare, importing, install, listing,
                           network, probe, report, run, storage, vm, worker, fleet)

# Commands that measure: one at a time per host (lifecycle.lock).
MEASURING = {"ciphers", "storage", "network", "run", "vm", "worker"}
COMMANDS = [probe, ciphers, storage, network, run, vm, fleet, listing, report, compare, baseline,
            check, importing, cleanup, install, worker]


# What each command's --help ends with: a first command line or two to copy (the README's
# test parses every one of them).
EXAMPLES = {
    "cryptcost": ["cryptcost run", "cryptcost probe", "cryptcost COMMAND --help"],
    "probe": ["cryptcost probe", "cryptcost probe --json"],
    "ciphers": ["cryptcost ciphers",
                "cryptcost ciphers --engine openssl --algo aes-256-xts --accel on,off"],
    "storage": ["cryptcost storage --stacks fscrypt,gocryptfs --workloads quick",
                "cryptcost storage --stacks all --medium throttled:200MB/s --json"],
    "network": ["cryptcost network --stacks tls,wireguard --workloads send",
                "cryptcost network --stacks 'ssh:*' --accel on,off"],
    "run": ["cryptcost run", "cryptcost run --suite standard --time-budget 30m",
            "cryptcost run --plan my.toml --device-speed 3GB/s"],
    "vm": ["cryptcost vm -- storage --stacks luks --json",
           "cryptcost vm --blacklist aesni_intel -- ciphers --engine kernel"],
    "list": ["cryptcost list", "cryptcost list --json"],
    "show": ["cryptcost show latest", "cryptcost show latest --json --samples"],
    "report": ["cryptcost report latest --format html -o report.html",
               "cryptcost report 3 --format csv"],
    "compare": ["cryptcost compare 1 2", "cryptcost compare 1 2 --json"],
    "import": ["cryptcost import other-host.json"],
    "baseline": ["cryptcost baseline save nightly", "cryptcost baseline list",
                 "cryptcost baseline export nightly -o nightly.json"],
    "check": ["cryptcost check --against nightly",
              "cryptcost check --against nightly --threshold 5%,network=10% --format junit"],
    "cleanup": ["cryptcost cleanup"],
    "install": ["cryptcost install smb3 nfs", "cryptcost install guest --dry-run"],
    "fleet": ["cryptcost fleet run --hosts web1,web2,db1",
              "cryptcost fleet run --hosts @inventory.ini --plan my.toml --json"],
    "worker": ["cryptcost worker"],
}


def _examples(parser: argparse.ArgumentParser, name: str) -> None:
    parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as a one-line :class:`UserError`."""

    def error(self, message: str):
        raise UserError(f"{self.prog}: {message} (see --help)")


def _global_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """--debug, -v and --db, accepted before or after the subcommand. Under a
    subcommand they default to nothing, so a value given before it stands."""
    keep = {} if defaults else {"default": argparse.SUPPRESS}
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks and every command run", **keep)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each external command",
                        **keep)
    parser.add_argument("--db", metavar="PATH", help="result store (default: "
                        "$XDG_DATA_HOME/cryptcost/results.db)", **({} if defaults else keep))


def build_parser() -> Parser:
    parser = Parser(prog="cryptcost", description="What encryption costs on this machine, "
                    "and which option to pick.")
    parser.add_argument("--version", action="version", version=f"cryptcost {__version__}")
    _global_options(parser, defaults=True)
    common = Parser(add_help=False)
    _global_options(common, defaults=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        module.add_parser(sub, common)
    _examples(parser, "cryptcost")
    for name, command in sub.choices.items():
        _examples(command, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        verbose = args.debug or getattr(args, "verbose", False)
        logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                            format=("%(relativeCreated)8.0fms " if verbose else "")
                            + "%(levelname)s %(name)s: %(message)s")
        if not args.command:
            build_parser().print_help()
            return 2
        if args.command in MEASURING and not getattr(args, "dry_run", False):
            require_free()                          # a second run refuses at once, before any work
        return args.func(args) or 0
    except CryptcostError as exc:
        if debug:
            raise
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except (KeyboardInterrupt, Terminated):
        print(f"error: interrupted; {released_message()}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
        if debug:
            raise
        print(f"error: internal error {type(exc).__name__}: {_one_line(str(exc))} "
              "(rerun with --debug for the traceback, and please report it)", file=sys.stderr)
        return 1


def released_message() -> str:
    """What this process's journals say was released: never more than they support."""
    left = []
    for path in journals():
        try:
            journal = Journal.load(path)
        except OSError:
            continue
        if journal.owner_pid == os.getpid():
            left += journal.pending()
    if not left:
        return "everything this run set up was released (its journal is empty)"
    kinds = sorted({e.type for e in left})
    return (f"{len(left)} resource(s) could not be released ({', '.join(kinds)}): "
            "run 'cryptcost cleanup'")


def _one_line(text: str) -> str:
    return " ".join(text.split())
