"""A stand-in for Slurm's ``scancel`` on PATH: a script that appends its argv (JSON, one
line per call) to a file and exits with a chosen status."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SCRIPT = """#!{python}
import json, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv) + "\\n")
if {fail}:
    sys.stderr.write("scancel: error: Kill job error on job id 1: Invalid job id specified\\n")
    sys.exit(1)
"""


def install(bin_dir: Path, fail: bool = False) -> Path:
    """Write ``bin_dir/scancel``; returns the file its calls are recorded in."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = bin_dir / "scancel-calls.jsonl"
    script = bin_dir / "scancel"
    script.write_text(SCRIPT.format(python=sys.executable, log=str(log), fail=fail))
    script.chmod(0o755)
    return log


def calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
