"""Collector pipeline cost in CPU instructions per GPU-sample, counted by valgrind.

Run from the repository root::

    .venv/bin/python -m bench.collector_instructions                   # this checkout
    .venv/bin/python -m bench.collector_instructions --against HEAD~5  # and a revision
    .venv/bin/python -m bench.collector_instructions --quick           # the smoke test

bench/collector_throughput.py measures CPU seconds, which on a shared machine move by ~30 %
from run to run, more than most changes to the code. This runs the same pipeline drive
(``run_collector`` with one caller: decode, validate, ingest into a real SQLite ledger, the
apply ticks, the evaluations) in a child process under valgrind's callgrind, with
instrumentation switched on (``callgrind_control -i on``) only from the first batch to the
last tick, and reports instructions executed per GPU-sample. The count is the same from run
to run within ~0.1 %, so an optimisation of 1 % shows.

It counts user-space instructions only: the kernel's side of SQLite's writes and fsyncs is
not in it, nor are cache misses; use it to compare code, and collector_throughput for time.
``--against REV`` checks REV out into a temporary git worktree and runs the same there with
this checkout's interpreter, one after the other. Needs ``valgrind`` (Debian package).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.harness import print_table

ROOT = Path(__file__).resolve().parent.parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


#: what the child under valgrind runs, with the tree measured as its working directory (so
#: ``python -c`` imports that tree's collector and bench code): the batches are built, then
#: the pipeline runs with instrumentation on around ``feed_one_caller``. It patches the
#: module global ``run_collector`` calls, so an older revision can be measured as it is.
CHILD = """
import os, subprocess, sys, tempfile, time
from pathlib import Path
import bench.collector_throughput as throughput

gpus, seconds, synchronous = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
apply_every = float(sys.argv[4]) if sys.argv[4] != "default" else None
feed = throughput.feed_one_caller

def toggle(state):
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())],
                   capture_output=True, check=True)

def counted(*args, **kwargs):
    toggle("on")
    try:
        return feed(*args, **kwargs)
    finally:
        toggle("off")

throughput.feed_one_caller = counted
start = time.time() - seconds - 100
arrivals = throughput.encode_fleet(gpus, seconds, start)
with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
    extra = {} if apply_every is None else {"apply_every": apply_every}
    timed = throughput.run_collector(arrivals, start, Path(tmp), synchronous=synchronous, **extra)
print(f"samples {timed.samples} applied {timed.applied}")
"""


def count(
    tree: Path, gpus: int, seconds: int, synchronous: str, apply_every: float | None = None
) -> tuple[int, int]:
    """(instructions, GPU-samples) of one run of the pipeline in ``tree`` (``apply_every``:
    ``ingest.apply_interval_seconds``; None: that tree's default)."""
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={tmp}/callgrind.out", sys.executable, "-c", CHILD,
             str(gpus), str(seconds), synchronous,
             "default" if apply_every is None else str(apply_every)],
            cwd=tree, capture_output=True, text=True, check=False,
        )  # fmt: skip
    found = _COLLECTED.search(done.stderr)
    samples = re.search(r"samples (\d+) applied (\d+)", done.stdout)
    if done.returncode != 0 or found is None or samples is None:
        raise RuntimeError(f"the callgrind run in {tree} failed:\n{done.stdout}{done.stderr}")
    if samples.group(1) != samples.group(2):
        raise RuntimeError(f"{tree}: applied {samples.group(2)} of {samples.group(1)} samples")
    return int(found.group(1)), int(samples.group(1))


def worktree(revision: str, into: Path) -> Callable[[], None]:
    """Check ``revision`` out at ``into``; returns what removes the worktree again."""
    subprocess.run(["git", "worktree", "add", "--detach", str(into), revision],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip

    def remove() -> None:
        subprocess.run(["git", "worktree", "remove", "--force", str(into)],
                       cwd=ROOT, check=False, capture_output=True)  # fmt: skip

    return remove


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200], metavar="GPUS")
    parser.add_argument("--seconds", type=int, default=45, help="simulated seconds of batches")
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="NORMAL")
    parser.add_argument(
        "--apply-every",
        type=float,
        metavar="SECONDS",
        help="ingest.apply_interval_seconds (default: each tree's default)",
    )
    parser.add_argument("--against", metavar="REV", help="also count a git revision")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install -y valgrind); nothing counted")
        return 1
    sizes, seconds = ([16], 20) if args.quick else (args.sizes, args.seconds)
    trees = [("this checkout", ROOT)]
    cleanup: list[Callable[[], None]] = []
    with tempfile.TemporaryDirectory(prefix="bench-against-") as tmp:
        if args.against:
            cleanup.append(worktree(args.against, Path(tmp) / "tree"))
            trees.append((args.against, Path(tmp) / "tree"))
        try:
            rows = []
            for gpus in sizes:
                per_sample = {}
                for name, tree in trees:
                    instructions, samples = count(
                        tree, gpus, seconds, args.synchronous, args.apply_every
                    )
                    per_sample[name] = instructions / samples
                    rows.append({"GPUs": gpus, "code": name, "GPU-samples": samples,
                                 "instructions": instructions,
                                 "per GPU-sample": round(per_sample[name])})  # fmt: skip
                if args.against:
                    ratio = per_sample["this checkout"] / per_sample[args.against]
                    rows[-2]["vs " + args.against] = f"{ratio:.3f}x"
                    rows[-1]["vs " + args.against] = "1.000x"
        finally:
            for remove in cleanup:
                remove()
    applied = "default" if args.apply_every is None else f"{args.apply_every:g} s"
    print(f"Collector pipeline, instructions per GPU-sample (callgrind; ledger.synchronous "
          f"{args.synchronous}; {seconds} simulated seconds, one caller; apply interval "
          f"{applied})")  # fmt: skip
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
