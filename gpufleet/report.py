"""``gpufleet report TRACE``: waste, energy and carbon by namespace."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> None:
    p = commands.add_parser("report", help="report waste, energy and carbon")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
