"""A stand-in for Slurm's ``scancel`` on PATH: a script that appends its argv (JSON, one
line per call) to a file and exits with a chosen status; and for ``scontrol show job -o``,
which says a job is RUNNING until the stand-in scancel was called for it (CANCELLED).

Tests about the executor against Slurm itself use the real cluster (tests/slurm)."""

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


SCONTROL = """#!{python}
import json, os, sys
job = sys.argv[-1]
calls = [json.loads(line) for line in open({log!r})] if os.path.exists({log!r}) else []
state = "CANCELLED" if any(c[-1] == job for c in calls) and not {fail} else "RUNNING"
print(f"JobId={{job}} JobName=stand-in UserId=root(0) JobState={{state}} Reason=None")
"""


def install(bin_dir: Path, fail: bool = False) -> Path:
    """Write ``bin_dir/scancel`` and ``bin_dir/scontrol``; returns the file scancel's calls
    are recorded in."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = bin_dir / "scancel-calls.jsonl"
    for name, text in (("scancel", SCRIPT), ("scontrol", SCONTROL)):
        script = bin_dir / name
        script.write_text(text.format(python=sys.executable, log=str(log), fail=fail))
        script.chmod(0o755)
    return log


def calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
