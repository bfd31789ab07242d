"""``gpufleet ledger migrate``: copy a SQLite ledger, with its pending intake, into a new
PostgreSQL ledger (collector/ledger/transfer.py). Stop the collector first: its batch log
is held while it runs, and the copy is refused."""

from __future__ import annotations

import argparse
from typing import Any

from collector.ledger.postgres import redacted
from collector.ledger.records import LedgerError
from collector.ledger.schema import is_postgres_url
from collector.ledger.store import Ledger
from collector.ledger.transfer import copy_ledger


def add_parser(commands: Any) -> None:
    p = commands.add_parser("ledger", help="ledger maintenance", description=__doc__)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = actions.add_parser(
        "migrate", help="copy a SQLite ledger into an empty PostgreSQL one", description=__doc__
    )
    migrate.add_argument("--from", dest="source", required=True, help="the SQLite ledger file")
    migrate.add_argument("--to", dest="target", required=True, help="postgresql://... (empty)")
    migrate.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if is_postgres_url(args.source) or not is_postgres_url(args.target):
        raise LedgerError(
            "ledger migrate: --from takes the SQLite ledger file and --to a postgresql:// URL "
            f"(got --from {redacted(args.source)!r} --to {redacted(args.target)!r})"
        )
    with Ledger.open(args.source) as source, Ledger.open(args.target) as target:
        report = copy_ledger(source, target)
    copied = ", ".join(f"{t} {n}" for t, n in report.rows.items() if n) or "no rows"
    print(
        f"copied {args.source} into {redacted(args.target)}: {copied}; "
        f"{report.pending_batches} pending batches to replay"
    )
    return 0
