"""What a newcomer sees in the first minutes: a taken port, a zero, --version, --help, a
narrow terminal, where dashboards went. Each is run as a real command and its output read."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet.cli.replay import WorkloadFigures, print_table
from tests.ports import free_port_block

ROOT = Path(__file__).parents[2]


def gpufleet(*argv: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``gpufleet ARGV`` in ``cwd``, with this checkout's packages first on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *argv],
        capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env,
    )  # fmt: skip


@pytest.fixture
def taken() -> Iterator[socket.socket]:
    """A listening socket on loopback: the port another process already serves."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port_block(6)))
        sock.listen()
        yield sock


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr


def test_a_demo_whose_agent_port_is_taken_names_the_port_and_what_to_do() -> None:
    """The demo's third agent would listen on --port + 3; that port is taken (the ports
    below it were free a moment ago: free_port_block)."""
    port = free_port_block(8)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 3))
        taken.listen()
        result = gpufleet("demo", "--port", str(port), "--history", "0", "--duration", "1",
                          "--plain")  # fmt: skip
    no_traceback(result)
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert f"port {port + 3} on 127.0.0.1" in line
    assert "already in use" in line and "gpu-node-02" in line
    assert f"--port {port + 100}" in line


def test_a_collector_on_a_taken_port_says_so_in_one_line(
    taken: socket.socket, tmp_path: Path
) -> None:
    port = int(taken.getsockname()[1])
    config = tmp_path / "collector.yaml"
    config.write_text("server:\n  allow_anonymous: true\n")
    result = gpufleet("collector", "--config", str(config), "--port", str(port),
                      "--db", str(tmp_path / "ledger.db"))  # fmt: skip
    no_traceback(result)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"gpufleet collector: port {port} on 127.0.0.1 (the collector's API and /metrics) is "
        "already in use; another collector running? set --port or server.port"
    )
    assert not (tmp_path / "ledger.db").exists()  # nothing was built


@pytest.mark.parametrize("flag", ["--nodes", "--gpus-per-node"])
def test_demo_with_zero_nodes_or_gpus_is_a_usage_error(flag: str) -> None:
    result = gpufleet("demo", flag, "0")
    no_traceback(result)
    assert result.returncode == 2
    assert f"argument {flag}: must be at least 1, got 0" in result.stderr


def test_version_names_the_installed_distribution() -> None:
    from importlib import metadata

    result = gpufleet("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gpufleet {metadata.version('gpufleet')}"


@pytest.mark.parametrize("command", ["demo", "report", "collector", "agent", "replay"])
def test_help_is_plain_text_and_shows_defaults(command: str) -> None:
    result = gpufleet(command, "--help")
    assert result.returncode == 0
    assert "``" not in result.stdout
    assert "(default: " in result.stdout or "(default " in result.stdout


def test_demo_help_gives_each_default() -> None:
    out = gpufleet("demo", "--help").stdout
    flat = " ".join(out.split())
    for flag, default in (("--port", "8080"), ("--nodes", "4"), ("--gpus-per-node", "8"),
                          ("--history", "1.0"), ("--seed", "0")):  # fmt: skip
        start = flat.index(f"{flag} {flag.lstrip('-').upper().replace('-', '_')} ")
        assert f"(default: {default})" in flat[start : start + 200], flag


def test_replay_at_80_columns_keeps_every_workload_name_whole() -> None:
    """Seven pods of one trace share a 24-character prefix; cut at 80 columns they all
    read the same. Folded, each name is whole when its cell's lines are joined."""
    names = [f"pod:alibaba-genai-2026/{pod}-{'x' * 12}" for pod in
             ("87b9247b", "673d3687", "9f86ada5", "e776c139")]  # fmt: skip
    figures = [WorkloadFigures(name, 1440, 0.5, 3600.0, 7200.0, 7200.0, 0.0) for name in names]
    out = io.StringIO()
    print_table(figures, 57.0, Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = [line.split("│")[1].strip() for line in lines if line.count("│") > 2]
    joined = "".join(cells)
    for name in names:
        assert name in joined
    assert all(row[-1] != "…" for row in cells)


def test_dashboards_generate_says_where_it_wrote(tmp_path: Path) -> None:
    result = gpufleet("dashboards", "generate", cwd=tmp_path)
    assert result.returncode == 0
    written = sorted((tmp_path / "dashboards").glob("*.json"))
    assert written
    assert result.stderr.strip() == (
        f"gpufleet dashboards generate: wrote {len(result.stdout.split())} files to "
        f"{tmp_path / 'dashboards'} (--out chooses the directory)"
    )


def test_the_demo_says_what_it_does_while_it_pre_runs_history() -> None:
    port = free_port_block(3)
    result = gpufleet("demo", "--port", str(port), "--nodes", "2", "--history", "0.5",
                      "--duration", "1", "--plain", timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "pre-running 0.5 simulated hours of history for 16 GPUs ..." in lines
    steps = [line.strip() for line in lines if line.strip().startswith("history ")]
    assert steps and steps == sorted(steps, key=lambda s: int(s.split()[1].rstrip("%")))


@pytest.mark.parametrize(
    ("period", "says"),
    [("-1d", "--period: a length of time back from --end, not negative (e.g. 7d), got '-1d'"),
     ("0h", "--period: must be longer than zero (e.g. 24h or 7d), got '0h'")],
)  # fmt: skip
def test_report_refuses_a_negative_or_empty_period(tmp_path: Path, period: str, says: str) -> None:
    """``--period -1d`` used to be "expected one argument" (argparse took -1d for an
    option) and ``--period 0h`` an empty table with exit 0."""
    ledger = tmp_path / "ledger.db"
    ledger.touch()
    result = gpufleet("report", "--db", str(ledger), "--period", period)
    no_traceback(result)
    assert result.returncode == 2
    assert result.stderr.strip() == f"gpufleet report: configuration error: {says}"


def test_a_negative_number_still_reaches_its_option() -> None:
    from gpufleet.cli.main import joined_values

    assert joined_values(["demo", "--skew", "-30", "--", "-1"]) == [
        "demo", "--skew=-30", "--", "-1"]  # fmt: skip
