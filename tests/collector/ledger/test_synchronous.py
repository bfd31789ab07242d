"""``ledger.synchronous`` reaches SQLite: the collector's ledger connections report it.

SQLite's ``PRAGMA synchronous`` answers 1 for NORMAL and 2 for FULL (per connection).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.config import CollectorSettings
from collector.ledger.store import Ledger
from gpufleet.cli.collector import build_collector
from gpufleet.settings import ConfigError
from tests.collector.influx.influx_server import free_port
from tests.collector.settings_file import load

NORMAL, FULL = 1, 2


def pragma_synchronous(ledger: Ledger) -> list[int]:
    """What SQLite says on the writer's and the reader's connection."""
    conns = (ledger.engine._writer, ledger.engine._reader)  # the pragma is per connection
    return [int(conn.execute("PRAGMA synchronous").fetchone()[0]) for conn in conns]


def collector_pragma(settings: CollectorSettings) -> list[int]:
    collector = build_collector(settings, lambda: 1.7e9, tokens=frozenset({"t"}))
    try:
        assert collector.ledger.engine._writer is not collector.ledger.engine._reader
        return pragma_synchronous(collector.ledger)
    finally:
        collector.stop()


def test_the_default_is_full(tmp_path: Path) -> None:
    settings = load(tmp_path, "")
    assert settings.ledger.synchronous == "FULL"
    assert collector_pragma(settings) == [FULL, FULL]


def test_normal_from_the_yaml_file(tmp_path: Path) -> None:
    settings = load(tmp_path, "  synchronous: NORMAL\n")
    assert collector_pragma(settings) == [NORMAL, NORMAL]


def test_normal_from_the_environment(tmp_path: Path) -> None:
    settings = load(tmp_path, "  synchronous: FULL\n", {"GPUFLEET_LEDGER__SYNCHRONOUS": "NORMAL"})
    assert collector_pragma(settings) == [NORMAL, NORMAL]


def test_full_from_the_environment_over_normal_in_the_file(tmp_path: Path) -> None:
    settings = load(tmp_path, "  synchronous: NORMAL\n", {"GPUFLEET_LEDGER__SYNCHRONOUS": "FULL"})
    assert collector_pragma(settings) == [FULL, FULL]


def test_the_ledger_with_an_influx_sink_gets_it_too(tmp_path: Path) -> None:
    """With influx.url set the collector attaches a sink to its ledger: same setting."""
    influx = f"  timeout_seconds: 1\n  url: http://127.0.0.1:{free_port()}\n  database: fleet\n"
    settings = load(tmp_path, f"  synchronous: NORMAL\ninflux:\n{influx}")
    collector = build_collector(settings, lambda: 1.7e9, tokens=frozenset({"t"}))
    try:
        assert collector.influx is not None
        assert pragma_synchronous(collector.ledger) == [NORMAL, NORMAL]
    finally:
        collector.stop()


@pytest.mark.parametrize("value", ["OFF", "fast", "normal", "EXTRA", ""])
def test_a_bad_value_in_the_environment_is_refused_naming_key_and_value(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, "", {"GPUFLEET_LEDGER__SYNCHRONOUS": value})
    assert str(caught.value) == (
        "environment variable GPUFLEET_LEDGER__SYNCHRONOUS: "
        f"ledger.synchronous: must be FULL or NORMAL, got {value!r}"
    )


@pytest.mark.parametrize("value", ['"OFF"', "fast"])
def test_a_bad_value_in_the_yaml_file_is_refused_naming_key_and_value(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, f"  synchronous: {value}\n")
    assert str(caught.value) == (
        f"config file {tmp_path / 'collector.yaml'}: "
        f"ledger.synchronous: must be FULL or NORMAL, got {value.strip(chr(34))!r}"
    )


def test_bare_off_in_yaml_is_a_boolean_and_refused_naming_the_key(tmp_path: Path) -> None:
    """YAML 1.1 reads a bare OFF as false: refused, never taken as a mode."""
    expected = r"^config file \S+: ledger\.synchronous: expected a string"
    with pytest.raises(ConfigError, match=expected) as caught:
        load(tmp_path, "  synchronous: OFF\n")
    assert "boolean False" in str(caught.value)
    assert "quote the value" in str(caught.value)
