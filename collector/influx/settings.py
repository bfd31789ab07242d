"""The ``influx:`` section of the collector's settings (no dependency on influxdb-client,
which is optional: ``pip install gpufleet[influx]``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.settings import ConfigError


@dataclass(frozen=True)
class InfluxSettings:
    """``influx:`` section. Empty ``url`` = no sink. InfluxDB 2: ``org`` and ``bucket``;
    InfluxDB 3: ``database`` (written through its v2-compatible endpoint)."""

    url: str = ""
    #: an API token (prefer the environment or ``token_file``; never logged)
    token: str = field(default="", repr=False)
    token_file: Path | None = None
    org: str = ""
    bucket: str = ""
    database: str = ""
    #: points held while InfluxDB is slow or down; beyond it the oldest are dropped
    queue_max_points: int = 100_000
    #: points per write request
    batch_points: int = 5_000
    #: the worker writes what is queued at least this often
    flush_interval_seconds: float = 1.0
    timeout_seconds: float = 10.0
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not self.url:
            return
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"influx.url: must start with http:// or https://, got {self.url!r}")
        if self.database and (self.bucket or self.org):
            raise ConfigError("influx: set database (InfluxDB 3) or org and bucket (2), not both")
        if not self.database and not (self.org and self.bucket):
            raise ConfigError("influx: InfluxDB 2 needs org and bucket; InfluxDB 3 needs database")
        for name in ("queue_max_points", "batch_points", "timeout_seconds"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"influx.{name}: must be > 0, got {getattr(self, name)}")
        if not 0 < self.retry_initial_seconds <= self.retry_max_seconds:
            raise ConfigError("influx: need 0 < retry_initial_seconds <= retry_max_seconds")

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def version(self) -> int:
        """3 when ``database`` is set, else 2."""
        return 3 if self.database else 2
