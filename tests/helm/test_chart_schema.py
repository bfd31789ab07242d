"""values.schema.json (draft-07) covers every value and rejects bad ones with clear messages."""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml
from helm_python.errors import HelmValuesError

from tests.helm.chart import CHART_DIR, FULL_VALUES

SCHEMA = json.loads((CHART_DIR / "values.schema.json").read_text())


def validate(values: dict[str, Any]) -> None:
    with helm.Chart.load(str(CHART_DIR)) as chart:
        chart.validate_schema(values)


def test_the_schema_is_draft_07_and_itself_valid() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", [CHART_DIR / "values.yaml", FULL_VALUES], ids=lambda p: p.name)
def test_the_shipped_values_files_are_valid(path: Any) -> None:
    values = yaml.safe_load(path.read_text())
    jsonschema.Draft7Validator(SCHEMA).validate(values)
    validate(values)


def _objects(schema: dict[str, Any], where: str) -> list[str]:
    """Paths of object schemas that accept keys they do not name (typos would pass)."""
    loose = []
    if schema.get("type") == "object" and "properties" in schema:
        if schema.get("additionalProperties") is not False:
            loose.append(where)
        for key, sub in schema["properties"].items():
            loose += _objects(sub, f"{where}.{key}")
    if isinstance(schema.get("items"), dict):
        loose += _objects(schema["items"], f"{where}[]")
    return loose


def test_no_object_with_named_keys_accepts_unknown_ones() -> None:
    assert _objects(SCHEMA, "") == []


def test_every_default_value_is_described() -> None:
    """Each key in values.yaml has a schema entry (additionalProperties false would say so)."""

    def walk(values: Any, schema: dict[str, Any], where: str) -> None:
        if isinstance(values, dict) and "properties" in schema:
            for key, value in values.items():
                assert key in schema["properties"], f"{where}.{key} is not in the schema"
                walk(value, schema["properties"][key], f"{where}.{key}")

    walk(yaml.safe_load((CHART_DIR / "values.yaml").read_text()), SCHEMA, "")


BAD_VALUES = [
    (
        "collector:\n  config:\n    actions:\n      default:\n        mode: off\n",
        "at '/collector/config/actions/default/mode': got boolean, want string",
    ),  # bare off is a YAML boolean
    (
        "collector:\n  config:\n    actions:\n      policies:\n        ml: {mode: kill}\n",
        "at '/collector/config/actions/policies/ml/mode': value must be one of 'off', 'notify'",
    ),
    (
        "agent:\n  config:\n    source:\n      interval_seconds: fast\n",
        "at '/agent/config/source/interval_seconds': got string, want number",
    ),
    (
        "agent:\n  config:\n    shipper:\n      token: s3cret\n",
        "at '/agent/config/shipper': additional properties 'token' not allowed",
    ),
    (
        "collector:\n  config:\n    carbon:\n      pue: 5\n",
        "at '/collector/config/carbon/pue': maximum: got 5, want 3",
    ),
    (
        "collector:\n  config:\n    analysis:\n      idle_window_secs: 60\n",
        "additional properties 'idle_window_secs' not allowed",
    ),
    (
        "collector:\n  config:\n    ledger:\n      synchronous: normal\n",
        "at '/collector/config/ledger/synchronous': value must be one of 'FULL', 'NORMAL'",
    ),
    ('agent:\n  hostPID: "yes"\n', "at '/agent/hostPID': got string, want boolean"),
    (
        "agent:\n  spool:\n    type: nfs\n",
        "at '/agent/spool/type': value must be one of 'hostPath', 'emptyDir'",
    ),
    (
        "monitoring:\n  agent:\n    kind: Probe\n",
        "at '/monitoring/agent/kind': value must be one of 'PodMonitor', 'ServiceMonitor'",
    ),
    ("collector:\n  config:\n    server:\n      port: 70000\n", "maximum: got 70,000, want 65,535"),
    (
        "collector:\n  config:\n    notifications:\n      channels: [{name: a, kind: telegram}]\n",
        "at '/collector/config/notifications/channels/0/kind': value must be one of",
    ),
    ("secret:\n  webhooks:\n    ops: not-a-url\n", "at '/secret/webhooks/ops'"),
]


@pytest.mark.parametrize(("text", "message"), BAD_VALUES, ids=[m for _, m in BAD_VALUES])
def test_bad_values_are_refused_naming_the_key(text: str, message: str) -> None:
    values = helm.values_from_yaml(text)  # Helm's own YAML reading (YAML 1.1 booleans)
    with pytest.raises(HelmValuesError) as caught:
        validate(values)
    assert message in str(caught.value)
