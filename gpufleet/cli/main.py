"""``gpufleet`` command line: agent, collector, demo, replay, report, ledger."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from importlib import metadata

from collector.ledger.records import LedgerError
from gpufleet.cli.help import Parser
from gpufleet.cli.listen import PortTaken
from gpufleet.settings import ConfigError

#: a value that starts with a dash and a digit: ``-1d``, ``-30``
_DASHED_VALUE = re.compile(r"^-\d")


def version() -> str:
    """The installed distribution's version ("unknown" when run from a bare source tree)."""
    try:
        return metadata.version("gpufleet")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gpufleet", description=__doc__)
    parser.add_argument("--version", action="version", version=f"gpufleet {version()}")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from gpufleet.cli import agent, collector, dashboards, demo, ledger, replay, report

    for module in (agent, collector, demo, replay, report, dashboards, ledger):
        module.add_parser(commands)
    return parser


def joined_values(argv: Sequence[str]) -> list[str]:
    """``--opt -1d`` as ``--opt=-1d``: argparse reads a value that starts with ``-`` and is
    not a plain negative number as another option and answers "expected one argument";
    joined, the option's own check says what is wrong with the value."""
    out: list[str] = []
    for arg in argv:
        prev = out[-1] if out else ""
        if _DASHED_VALUE.match(arg) and prev.startswith("--") and prev != "--" and "=" not in prev:
            out[-1] = f"{prev}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(joined_values(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # one line per HTTP request (every shipped batch, every scheduler run) drowns the rest;
    # --log-level DEBUG shows them again
    for chatty in ("httpx", "httpcore", "apscheduler"):
        level = logging.DEBUG if logging.root.level <= logging.DEBUG else logging.WARNING
        logging.getLogger(chatty).setLevel(level)
    try:
        result: int = args.run(args)
    except ConfigError as err:
        print(f"gpufleet {args.command}: configuration error: {err}", file=sys.stderr)
        return 2
    except PortTaken as err:
        print(f"gpufleet {args.command}: {err}", file=sys.stderr)
        return 2
    except LedgerError as err:  # e.g. another collector holds the ledger's batch log
        print(f"gpufleet {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
