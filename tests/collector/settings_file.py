"""Collector settings loaded the way ``gpufleet collector --config FILE`` loads them."""

from __future__ import annotations

from pathlib import Path

from collector.config import CollectorSettings
from gpufleet.settings import load_settings


def load(
    tmp_path: Path, yaml_text: str, environ: dict[str, str] | None = None
) -> CollectorSettings:
    """Settings from a YAML file whose ``ledger:`` section starts with a url in ``tmp_path``
    and goes on with ``yaml_text`` (indent keys by two spaces to add to that section), with
    ``environ`` as the environment."""
    path = tmp_path / "collector.yaml"
    path.write_text(f"ledger:\n  url: {tmp_path / 'ledger.db'}\n{yaml_text}")
    return load_settings(CollectorSettings, path, environ or {})
