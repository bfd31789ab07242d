"""The real ``PointWriter``: influxdb-client's synchronous write API, errors translated.

Batching and retries are the sink's (collector.influx.sink); this client makes one attempt per
call (no urllib3 retries), so a down server is noticed within ``timeout_seconds``.
InfluxDB 3 takes the same ``/api/v2/write`` request with its database as the bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import urllib3
from influxdb_client.client.exceptions import InfluxDBError
from influxdb_client.client.influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from collector.influx.settings import InfluxSettings
from collector.influx.sink import InfluxWriteError

#: the server refused the points themselves: resending them cannot succeed
#: (400 malformed or partly rejected, 413 too large, 422 outside retention)
_FINAL_STATUSES = frozenset({400, 413, 422})


class InfluxWriter:
    def __init__(self, settings: InfluxSettings, token: str) -> None:
        self._bucket = settings.database or settings.bucket
        self._org = settings.org  # InfluxDB 3 ignores it
        self._client = InfluxDBClient(
            url=settings.url,
            token=token,
            org=self._org,
            timeout=int(settings.timeout_seconds * 1000),
            retries=False,
        )
        self._api: Any = self._client.write_api(write_options=SYNCHRONOUS)

    def write(self, lines: Sequence[str]) -> None:
        try:
            self._api.write(
                bucket=self._bucket,
                org=self._org,
                record=list(lines),
                write_precision="ns",
            )
        except InfluxDBError as err:
            status = getattr(err, "status", None)
            raise InfluxWriteError(
                f"HTTP {status}: {err.message}", retryable=status not in _FINAL_STATUSES
            ) from err
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise InfluxWriteError(f"{type(err).__name__}: {err}", retryable=True) from err

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]
