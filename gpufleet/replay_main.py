"""``gpufleet replay TRACE``: run a recorded trace through the collector pipeline."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> None:
    p = commands.add_parser("replay", help="run a recorded trace through the pipeline")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
