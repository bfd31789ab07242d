"""One environment prefix per program (issue 19 item 5): on a host where the agent and the
collector both run, each reads only its own ``GPUFLEET_<SECTION>__<KEY>`` variables, and a
bad key's message names where it came from (an environment variable, a config file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import AgentSettings
from collector.config import CollectorSettings
from gpufleet.settings import ConfigError, load_settings

BOTH = {"GPUFLEET_SERVER__TOKENS": "abc", "GPUFLEET_SHIPPER__TOKEN": "abc"}


def gpufleet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip


def test_the_agent_runs_beside_the_collector_s_variables() -> None:
    out = gpufleet("agent", "--source", "simulated", "--once", env=BOTH)
    assert out.returncode == 0, out.stderr
    assert "unknown key" not in out.stderr


def test_report_runs_beside_the_agent_s_variables(tmp_path: Path) -> None:
    out = gpufleet("report", "--db", str(tmp_path / "none.db"), env=BOTH)
    # no ledger there: the one complaint is that, not the agent's variable
    assert out.returncode != 0 and "no ledger at" in out.stderr, out.stderr
    assert "unknown key" not in out.stderr


def test_each_program_takes_its_own_and_ignores_the_other_s() -> None:
    agent = load_settings(AgentSettings, None, BOTH, foreign=(CollectorSettings,))
    collector = load_settings(CollectorSettings, None, BOTH, foreign=(AgentSettings,))
    assert agent.shipper.token == "abc"
    assert collector.server.tokens == ["abc"]


def test_a_section_neither_program_has_names_the_variable() -> None:
    environ = {"GPUFLEET_SHIPER__URL": "http://x"}
    with pytest.raises(ConfigError) as err:
        load_settings(AgentSettings, None, environ, foreign=(CollectorSettings,))
    assert str(err.value).startswith(
        "environment variable GPUFLEET_SHIPER__URL: shiper: unknown key"
    )


def test_a_bad_key_or_value_names_its_source(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("shipper:\n  urll: http://x\n")
    with pytest.raises(ConfigError) as err:
        load_settings(AgentSettings, config, {})
    assert str(err.value).startswith(f"config file {config}: shipper.urll: unknown key")
    environ = {"GPUFLEET_SHIPPER__URLL": "http://x"}
    with pytest.raises(ConfigError) as err:
        load_settings(AgentSettings, None, environ)
    assert str(err.value).startswith("environment variable GPUFLEET_SHIPPER__URLL: shipper.urll:")
    # the environment overrides the file, and the message says which one was bad
    config.write_text("shipper:\n  url: http://good\n")
    with pytest.raises(ConfigError) as err:
        load_settings(AgentSettings, config, {"GPUFLEET_SHIPPER__URL": "ftp://bad"})
    assert str(err.value).startswith(
        "environment variable GPUFLEET_SHIPPER__URL: shipper.url: must start with http://"
    )
    config.write_text("source:\n  interval_seconds: soon\n")
    with pytest.raises(ConfigError, match=f"^config file {config}: source.interval_seconds"):
        load_settings(AgentSettings, config, {})
