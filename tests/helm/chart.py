"""The chart rendered by the real Helm engine (helm-python-sdk bundles Helm's Go SDK).

No helm binary, no cluster: ``render`` returns every manifest as a parsed document, in the
order Helm emits them, with ``lookup`` answering empty as in ``helm template``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "helm" / "gpufleet"
FULL_VALUES = CHART_DIR / "ci" / "full-values.yaml"
RELEASE = "gf"
NAMESPACE = "gpu"


def full_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(FULL_VALUES.read_text())
    return values


@dataclass(frozen=True)
class Rendered:
    """Every document of one render, plus NOTES.txt."""

    docs: list[dict[str, Any]]
    notes: str

    def kinds(self) -> list[str]:
        return [d["kind"] for d in self.docs]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name_suffix: str = "") -> dict[str, Any]:
        found = [d for d in self.all(kind) if d["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, f"{len(found)} {kind} named *{name_suffix}: {self.kinds()}"
        return found[0]

    def pod_spec(self, kind: str) -> dict[str, Any]:
        spec: dict[str, Any] = self.one(kind)["spec"]["template"]["spec"]
        return spec

    def configmap_file(self, name_suffix: str, key: str) -> str:
        text: str = self.one("ConfigMap", name_suffix)["data"][key]
        return text

    def secret_value(self, key: str) -> str:
        return base64.b64decode(self.one("Secret")["data"][key]).decode()


def render(values: dict[str, Any] | None = None) -> Rendered:
    with helm.Chart.load(str(CHART_DIR)) as chart:
        chart.validate_schema(values or {})
        manifests = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE)
    docs: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return Rendered(docs, notes)


def container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    [only] = pod_spec["containers"]
    result: dict[str, Any] = only
    return result


def volume(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [v for v in pod_spec["volumes"] if v["name"] == name]
    result: dict[str, Any] = found
    return result


def mounts(pod_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mountPath -> volumeMount of the only container."""
    return {m["mountPath"]: m for m in container(pod_spec)["volumeMounts"]}


def env(pod_spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(pod_spec).get("env", [])}
