"""gpufleet's read path against nvitop and gpustat, over the same fake NVML library.

Run from the repository root (needs the ``bench`` extra: ``pip install -e '.[bench]'``)::

    .venv/bin/python -m bench.agent_peers             # 3 interleaved rounds, 300 polls each
    .venv/bin/python -m bench.agent_peers --quick     # a few seconds, for the smoke test
    .venv/bin/python -m bench.agent_peers --against /tmp/main   # + gpufleet from that tree

``--against TREE`` adds gpufleet as checked out in TREE (a ``git worktree`` of another
revision: its ``agent/`` and ``bench/``, run with TREE as working directory and
PYTHONPATH) to the same interleaved rounds, so before and after are measured side by side.

Every tool reads the 8x H100 fake-NVML scenario (tests/fakes) through the real
nvidia-ml-py binding, in a fresh interpreter of its own (gpustat patches the binding when
imported), and the rounds interleave the tools (the order rotates each round), so a
busy neighbour on the machine slows all of them alike. Per tool and round: ms of process
CPU per GPU-poll, with and without the fake library's own thread CPU (Python standing in
for libnvidia-ml's C), NVML calls per GPU-poll, and the fields the poll answered
(bench/peer_tools.py lists what each tool reads).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.agent_loop import SCENARIO, meter_fake_library
from bench.harness import print_table, python_module
from bench.peer_tools import (
    FIELD_NAMES,
    GPUS,
    TOOLS,
    live_pid_count,
    opened_tool,
    with_live_pids,
)

WARMUP_POLLS = 10
#: the label of gpufleet as checked out in ``--against``'s tree
AGAINST = "gpufleet --against"


class PollClock:
    """Simulated monotonic time, moved by the benchmark (1 s per poll) and by sleeps.

    Every tool and the fake library read this clock. tests.fakes' FakeClock takes a lock
    and keeps per-thread state on every read (for tests that sleep on it from many
    threads); gpufleet reads its monotonic clock ~30 times a poll where production calls
    time.monotonic, so with FakeClock the harness's own cost would be charged to it.
    Reading this one is an attribute load.
    """

    def __init__(self, start_seconds: float = 1000.0) -> None:
        self.now = start_seconds

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def measure(tool_name: str, polls: int) -> dict[str, Any]:
    """The child's work: warm up, then ``polls`` polls, CPU charged by ``process_time``."""
    from tests.fakes.nvml_lib import install_fake_nvml, load_scenario

    clock, spent = PollClock(), [0.0]
    scenario = load_scenario(SCENARIO)
    with (
        live_processes(live_pid_count(scenario)) as pids,
        install_fake_nvml(with_live_pids(scenario, pids), clock=clock) as fake,
    ):
        meter_fake_library(fake, spent)
        with opened_tool(tool_name, clock, pids) as tool:
            for _ in range(WARMUP_POLLS):
                clock.advance(1.0)
                tool.poll()
            calls_before, fake_before = sum(fake.calls.values()), spent[0]
            started = time.process_time()
            for _ in range(polls):
                clock.advance(1.0)  # a 1 Hz poll: GPM and energy see a second pass
                tool.poll()
            cpu_seconds = time.process_time() - started
            fields = sorted(tool.fields())
        gpu_polls = polls * GPUS
        return {
            "tool": tool_name,
            "gpu_polls": gpu_polls,
            "ms_per_gpu_poll": cpu_seconds * 1000 / gpu_polls,
            "fake_ms_per_gpu_poll": (spent[0] - fake_before) * 1000 / gpu_polls,
            "nvml_calls_per_gpu_poll": (sum(fake.calls.values()) - calls_before) / gpu_polls,
            "fields": fields,
        }


@contextlib.contextmanager
def live_processes(count: int) -> Iterator[list[int]]:
    """``count`` sleeping processes to stand in for the GPU's CUDA processes."""
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(count)]
    try:
        yield [sleeper.pid for sleeper in sleepers]
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def run_child(tool_name: str, polls: int, tree: Path | None = None) -> dict[str, Any]:
    """One tool in a fresh interpreter; ``tree``: run that checkout's code instead."""
    import os

    args = python_module("bench.agent_peers", "--child", tool_name, "--polls", str(polls))
    env = None if tree is None else dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=tree, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{tool_name} failed (exit {done.returncode}):\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_rounds(rounds: int, polls: int, against: Path | None) -> list[list[dict[str, Any]]]:
    """``rounds`` rounds of every tool, the order rotated each round."""
    labels = [*TOOLS, AGAINST] if against else list(TOOLS)
    results = []
    for number in range(rounds):
        order = labels[number % len(labels) :] + labels[: number % len(labels)]
        by_label = {}
        for label in order:
            if label == AGAINST:
                by_label[label] = {**run_child("gpufleet", polls, against), "tool": label}
            else:
                by_label[label] = run_child(label, polls)
        results.append([by_label[label] for label in labels])
    return results


def row(result: dict[str, Any], round_label: str) -> dict[str, object]:
    own = result["ms_per_gpu_poll"] - result["fake_ms_per_gpu_poll"]
    return {
        "round": round_label,
        "tool": result["tool"],
        "GPU-polls": result["gpu_polls"],
        "ms CPU per GPU-poll": round(result["ms_per_gpu_poll"], 4),
        "of which fake NVML ms": round(result["fake_ms_per_gpu_poll"], 4),
        "excluding fake ms": round(own, 4),
        "NVML calls per GPU-poll": round(result["nvml_calls_per_gpu_poll"], 2),
        "fields": len(result["fields"]),
    }


def report(results: list[list[dict[str, Any]]]) -> None:
    print(f"\nPer GPU-poll, {len(results)} interleaved rounds ({GPUS}x H100 fake NVML)")
    print_table([row(r, str(n + 1)) for n, tools in enumerate(results) for r in tools])
    print("\nMedian of the rounds, excluding the fake library's share")
    own = {
        result["tool"]: statistics.median(
            tools[index]["ms_per_gpu_poll"] - tools[index]["fake_ms_per_gpu_poll"]
            for tools in results
        )
        for index, result in enumerate(results[0])
    }
    medians = [
        {
            "tool": name,
            "median ms (excl. fake)": round(ms, 4),
            "gpufleet / tool": f"{own[TOOLS[0]] / ms:.2f}x",
        }
        for name, ms in own.items()
    ]
    print_table(medians)
    report_fields(results[-1])


def report_fields(results: list[dict[str, Any]]) -> None:
    print("\nFields answered (x) per tool, last round")
    answered = {r["tool"]: set(r["fields"]) for r in results}
    if AGAINST in answered:
        print(f"{AGAINST}: fields the checked-out gpufleet reads: {len(answered[AGAINST])}")
    print_table(
        [
            {"field": field, **{tool: "x" if field in answered[tool] else "" for tool in TOOLS}}
            for field in FIELD_NAMES
        ]
    )
    gpufleet = answered[TOOLS[0]]
    for tool in TOOLS[1:]:
        missing = sorted(answered[tool] - gpufleet)
        print(f"{tool}: fields gpufleet does not read: {', '.join(missing) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--polls", type=int, default=300, help="measured polls per tool and round")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--against", type=Path, help="also gpufleet as checked out in this tree")
    parser.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.polls)))
        return 0
    rounds, polls = (1, 20) if args.quick else (args.rounds, args.polls)
    print(
        f"Agent read path vs peers: {GPUS}x H100 ({SCENARIO}), {polls} polls per tool "
        f"and round at a simulated 1 Hz, after {WARMUP_POLLS} warm-up polls"
    )
    report(run_rounds(rounds, polls, args.against))
    return 0


if __name__ == "__main__":
    sys.exit(main())
