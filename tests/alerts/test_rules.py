"""The alert rules: promtool accepts them, its unit tests pass, every alert is tested both
firing and not firing, every alert carries what an on-call engineer needs, and the
Alertmanager example is a valid configuration."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboards.queries import ROOT, RULES, alerting_rules

PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
TESTS = ROOT / "alerts" / "tests" / "gpufleet-rules.test.yml"
ALERTMANAGER = ROOT / "alerts" / "alertmanager.example.yml"
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="Debian package prometheus")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="Debian package prometheus-alertmanager")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


@needs_promtool
def test_promtool_check_rules() -> None:
    result = _run(str(PROMTOOL), "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    result = _run(str(PROMTOOL), "test", "rules", str(TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """A rule with a changed threshold must make the unit tests fail."""
    rules = tmp_path / "gpufleet-rules.yml"
    text = RULES.read_text()
    assert "gpufleet_gpu_idle_seconds >= 1800" in text
    rules.write_text(text.replace("idle_seconds >= 1800", "idle_seconds >= 3600"))
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    shutil.copy(TESTS, tests_dir / TESTS.name)
    result = _run(str(PROMTOOL), "test", "rules", str(tests_dir / TESTS.name))
    assert result.returncode != 0
    assert "GpufleetGpuAllocatedIdle" in result.stdout + result.stderr


def _alert_cases() -> dict[str, dict[str, int]]:
    """alert name -> {"firing": n, "silent": n} over the promtool test file."""
    cases: dict[str, dict[str, int]] = {}
    for test in yaml.safe_load(TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            outcome = "firing" if case.get("exp_alerts") else "silent"
            counts = cases.setdefault(case["alertname"], {"firing": 0, "silent": 0})
            counts[outcome] += 1
    return cases


@pytest.mark.parametrize("rule", alerting_rules(), ids=lambda r: r["alert"])
def test_every_alert_is_tested_firing_and_not_firing(rule: dict[str, Any]) -> None:
    counts = _alert_cases().get(rule["alert"], {"firing": 0, "silent": 0})
    assert counts["firing"] >= 1 and counts["silent"] >= 1, counts


@pytest.mark.parametrize("rule", alerting_rules(), ids=lambda r: r["alert"])
def test_every_alert_has_severity_summary_description_and_runbook(rule: dict[str, Any]) -> None:
    assert rule["alert"].startswith("Gpufleet")
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    annotations = rule["annotations"]
    for key in ("summary", "description", "runbook"):
        assert len(annotations.get(key, "")) > 15, f"{key} missing or too short"


def test_the_issue_s_alerts_are_all_there() -> None:
    names = {rule["alert"] for rule in alerting_rules()}
    assert {
        "GpufleetGpuAllocatedIdle",
        "GpufleetWasteOverBudget",
        "GpufleetAgentDown",
        "GpufleetGpuDataStale",
        "GpufleetCollectorIngestErrors",
        "GpufleetGpuXid",
        "GpufleetGpuXidCritical",
        "GpufleetGpuThermalThrottling",
        "GpufleetGpuPowerThrottling",
        "GpufleetGpuUncorrectableEcc",
        "GpufleetEnergyCounterDisagrees",
        "GpufleetAgentSpoolGrowing",
    } <= names


@needs_amtool
def test_alertmanager_example_is_valid() -> None:
    result = _run(str(AMTOOL), "check-config", str(ALERTMANAGER))
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_example_routes_to_slack_and_the_collector() -> None:
    config = yaml.safe_load(ALERTMANAGER.read_text())
    receivers = {r["name"]: r for r in config["receivers"]}
    used = {config["route"]["receiver"]} | {r["receiver"] for r in config["route"]["routes"]}
    for name in used:
        receiver = receivers[name]
        assert receiver["slack_configs"]
        [hook] = receiver["webhook_configs"]
        assert hook["url"].endswith("/v1/alertmanager")
        assert hook["http_config"]["authorization"]["type"] == "Bearer"
